import { CairnError } from '@cairn/contracts';
import type { ReceiptEnvelope } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import { foldRun, isTerminal } from '@cairn/lifecycle';
import type { CancelRunCommand, CommandOk } from '@cairn/operational';
import { EVIDENCE_LOG } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import { checkEventFields } from './event-fields.check.js';
import { INTAKE_ACTOR } from './submit-run.handler.js';

/**
 * `cairn.cmd.cancel`: cancel a run of the tenant's that has not ended. Another tenant's run is
 * E_NOT_FOUND, like a run that does not exist (no cross-tenant reads); a sealed run E_SEALED; a
 * run already cancelled answers `duplicate`; one that ended otherwise is E_CONFLICT.
 */
@Injectable()
export class CancelRunHandler {
  constructor(@Inject(EVIDENCE_LOG) private readonly log: EvidenceLog) {}

  async handle(command: CancelRunCommand): Promise<Omit<CommandOk, 'ok'>> {
    const runId = command.run_id;
    const receipts: ReceiptEnvelope[] = [];
    for await (const stored of this.log.readChain(runId)) receipts.push(stored.receipt);
    const view = foldRun(receipts);
    if (view === null || view.tenant !== command.tenant) throw new CairnError('E_NOT_FOUND', `no run ${runId}`, { runId });
    if (view.sealed) throw new CairnError('E_SEALED', `run ${runId} is sealed`, { runId });
    if (view.state === 'CANCELLED') return { run_id: runId, duplicate: true };
    if (isTerminal(view.state)) throw new CairnError('E_CONFLICT', `run ${runId} has already ended ${view.state}`, { runId, state: view.state });
    // ADR 0003 asks for `run.cancel_requested` on a RUNNING run (the runtime stops the sandbox and
    // appends `run.cancelled`); the contracts have no such type yet, so a running run is cancelled
    // with `run.cancelled` too and the runtime watches for that.
    const fields = {
      cancelled_by: command.requested_by,
      ...(command.reason === undefined ? {} : { reason: command.reason }),
    };
    // No causation: a command caused it, not an event. The fixed key makes every cancel of a run one
    // logical event, so two cancels racing store one receipt.
    checkEventFields('run.cancelled', { chainId: runId, tenant: view.tenant, actor: INTAKE_ACTOR, causation: null }, fields);
    const appended = await this.log.append(runId, { type: 'run.cancelled', actor: INTAKE_ACTOR, tenant: view.tenant, causation: null, key: 'cancel', fields });
    return { run_id: runId, duplicate: appended.duplicate };
  }
}
