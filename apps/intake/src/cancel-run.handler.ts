import { CairnError } from '@cairn/contracts';
import type { CancelRunCommand, CommandOk, EventType, ReceiptEnvelope } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import { cancelPath, foldSandbox } from '@cairn/lifecycle';
import { EVIDENCE_LOG } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import { checkEventFields } from './event-fields.check.js';
import { decideOnStableHead, readCommandedRun } from './run-command.chain.js';
import { INTAKE_ACTOR } from './submit-run.handler.js';

/** One cancel per run: every cancel command of a run is the same logical event, so racing ones store one receipt. */
const CANCEL_KEY = 'cancel';

/**
 * `cairn.cmd.cancel`: cancel a run of the tenant's that has not ended (docs/adr/0003). A run that
 * is not running yet is cancelled at once (`run.cancelled`); a running one is asked to stop
 * (`run.cancel_requested`), and its runtime records the teardown and `run.cancelled`. The event is
 * appended guarded on the head it was decided from: a runtime receipt landing in between (the
 * run just started) makes intake read again and decide again. Another tenant's run is E_NOT_FOUND,
 * like a run that does not exist (no cross-tenant reads); a sealed run E_SEALED; a run cancelled
 * or asked already answers `duplicate`; one that ended otherwise is E_CONFLICT.
 */
@Injectable()
export class CancelRunHandler {
  constructor(@Inject(EVIDENCE_LOG) private readonly log: EvidenceLog) {}

  handle(command: CancelRunCommand): Promise<Omit<CommandOk, 'ok'>> {
    if (command.run_id.startsWith('sbx_')) return decideOnStableHead(() => this.deleteUncreatedSandbox(command));
    return decideOnStableHead(() => this.decideAndAppend(command));
  }

  /**
   * A sandbox deleted before any runtime created it (PENDING: asked for, decided, perhaps placed
   * or queued) ends at once with `run.cancelled` (docs/adr/0015): the scheduler then never places
   * it, and a runtime starting it finds its guarded `sandbox.created` refused and destroys what it
   * started. One already created (READY) is E_CONFLICT, `details.state` READY — its worker deletes
   * it; one that has ended answers `duplicate`.
   */
  private async deleteUncreatedSandbox(command: CancelRunCommand): Promise<Omit<CommandOk, 'ok'>> {
    const sandboxId = command.run_id;
    const raw: ReceiptEnvelope[] = [];
    for await (const stored of this.log.readChain(sandboxId)) raw.push(stored.receipt);
    const view = foldSandbox(raw);
    if (view === null || view.tenant !== command.tenant) throw new CairnError('E_NOT_FOUND', `no sandbox ${sandboxId}`, { sandboxId });
    if (view.state === 'READY') throw new CairnError('E_CONFLICT', `sandbox ${sandboxId} is READY: its worker deletes it`, { sandboxId, state: view.state });
    if (view.state !== 'PENDING' || view.sealed) return { run_id: sandboxId, duplicate: true };
    const fields = { cancelled_by: command.requested_by, ...(command.reason === undefined ? {} : { reason: command.reason }) };
    checkEventFields('run.cancelled', { chainId: sandboxId, tenant: view.tenant, actor: INTAKE_ACTOR, causation: null }, fields);
    const appended = await this.log.append(
      sandboxId,
      { type: 'run.cancelled', actor: INTAKE_ACTOR, tenant: view.tenant, causation: null, key: CANCEL_KEY, fields },
      { expectedHeadSeq: view.headSeq },
    );
    return { run_id: sandboxId, duplicate: appended.duplicate };
  }

  private async decideAndAppend(command: CancelRunCommand): Promise<Omit<CommandOk, 'ok'>> {
    const runId = command.run_id;
    const { view, receipts, headSeq } = await readCommandedRun(this.log, runId, command.tenant);
    const path = cancelPath(view, receipts);
    let type: EventType;
    let fields: Record<string, unknown>;
    const reason = command.reason === undefined ? {} : { reason: command.reason };
    switch (path.kind) {
      case 'sealed':
        throw new CairnError('E_SEALED', `run ${runId} is sealed`, { runId });
      case 'ended':
        throw new CairnError('E_CONFLICT', `run ${runId} has already ended ${path.state}`, { runId, state: path.state });
      case 'cancelled':
      case 'requested':
        return { run_id: runId, duplicate: true };
      case 'cancel':
        type = 'run.cancelled';
        fields = { cancelled_by: command.requested_by, ...reason };
        break;
      case 'request':
        type = 'run.cancel_requested';
        fields = { requested_by: command.requested_by, ...reason };
        break;
    }
    // No causation: a command caused it, not an event.
    checkEventFields(type, { chainId: runId, tenant: view.tenant, actor: INTAKE_ACTOR, causation: null }, fields);
    const appended = await this.log.append(
      runId,
      { type, actor: INTAKE_ACTOR, tenant: view.tenant, causation: null, key: CANCEL_KEY, fields },
      { expectedHeadSeq: headSeq },
    );
    return { run_id: runId, duplicate: appended.duplicate };
  }
}
