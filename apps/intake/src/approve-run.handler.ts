import { CairnError, eventId } from '@cairn/contracts';
import type { ApproveRunCommand, CommandOk } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import { approvalPath } from '@cairn/lifecycle';
import { EVIDENCE_LOG } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import { checkEventFields } from './event-fields.check.js';
import { decideOnStableHead, readCommandedRun } from './run-command.chain.js';
import { INTAKE_ACTOR } from './submit-run.handler.js';


/**
 * `cairn.cmd.approve`: a person's decision on the approvals a run of the tenant's awaits (PRODUCT.md
 * "Jobs and approvals"), decided from the chain by `approvalPath` and appended guarded on the head
 * it was decided from (docs/adr/0003): a runtime, scheduler or timeout landing in between makes
 * intake read and decide again. Each decision is caused by the request it answers and keyed by the
 * approval's id, so a repeated command stores nothing twice. Another tenant's run is E_NOT_FOUND;
 * a sealed run E_SEALED; the key that submitted the run E_FORBIDDEN; a run awaiting nothing
 * (or not the approval named) E_CONFLICT.
 */
@Injectable()
export class ApproveRunHandler {
  constructor(@Inject(EVIDENCE_LOG) private readonly log: EvidenceLog) {}

  handle(command: ApproveRunCommand): Promise<Omit<CommandOk, 'ok'>> {
    return decideOnStableHead(() => this.decideAndAppend(command));
  }

  private async decideAndAppend(command: ApproveRunCommand): Promise<Omit<CommandOk, 'ok'>> {
    const runId = command.run_id;
    const { view, receipts, headSeq } = await readCommandedRun(this.log, runId, command.tenant);
    const path = approvalPath(view, receipts, {
      actor: command.decided_by,
      decision: command.decision,
      ...(command.approval_id === undefined ? {} : { approvalId: command.approval_id }),
    });
    const comment = command.comment === undefined ? {} : { comment: command.comment };
    let head = headSeq;
    switch (path.kind) {
      case 'sealed':
        throw new CairnError('E_SEALED', `run ${runId} is sealed`, { runId });
      case 'ended':
        throw new CairnError('E_CONFLICT', `run ${runId} has already ended ${path.state}`, { runId, state: path.state });
      case 'self':
        throw new CairnError('E_FORBIDDEN', `the key that submitted run ${runId} may not approve or reject it`, { runId, reason: 'self_approval' });
      case 'nothing_pending': {
        const what = path.approvalId === null ? 'no approval' : `no approval ${path.approvalId}`;
        throw new CairnError('E_CONFLICT', `run ${runId} awaits ${what} (it is ${path.state})`, { runId, state: path.state });
      }
      case 'duplicate':
        return { run_id: runId, duplicate: true };
      case 'reject': {
        const fields = { approval_id: path.request.approval_id, rejected_by: command.decided_by, cause: 'rejected', ...comment };
        await this.append(runId, view.tenant, 'approval.rejected', eventId(runId, path.request.seq), path.request.approval_id, fields, head);
        return { run_id: runId, duplicate: false };
      }
      case 'grant': {
        let duplicate = true;
        for (const request of path.requests) {
          const fields = { approval_id: request.approval_id, approved_by: command.decided_by, ...comment };
          const appended = await this.append(runId, view.tenant, 'approval.granted', eventId(runId, request.seq), request.approval_id, fields, head);
          head = appended.seq;
          duplicate &&= appended.duplicate;
        }
        return { run_id: runId, duplicate };
      }
    }
  }

  private async append(
    runId: string,
    tenant: string,
    type: 'approval.granted' | 'approval.rejected',
    causation: string,
    key: string,
    fields: Record<string, unknown>,
    expectedHeadSeq: number,
  ): Promise<{ seq: number; duplicate: boolean }> {
    checkEventFields(type, { chainId: runId, tenant, actor: INTAKE_ACTOR, causation }, fields);
    const appended = await this.log.append(runId, { type, actor: INTAKE_ACTOR, tenant, causation, key, fields }, { expectedHeadSeq });
    return { seq: appended.receipt.seq, duplicate: appended.duplicate };
  }
}
