import { CairnError } from '@cairn/contracts';
import type { CommandOk, RegradeRunCommand } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import { regradePath } from '@cairn/lifecycle';
import { EVIDENCE_LOG } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import { checkEventFields } from './event-fields.check.js';
import { decideOnStableHead, readCommandedRun } from './run-command.chain.js';
import { INTAKE_ACTOR } from './submit-run.handler.js';

/**
 * `cairn.cmd.regrade` (docs/adr/0030): a verified run of the tenant's whose grading failed (a
 * judge that timed out, failed or was not configured) gets `grade.requested`, and the grader
 * grades it again — judges asked anew, the steps not run again — then seals it. Appended guarded
 * on the head it was decided from, keyed per attempt, so racing requests store one. Another
 * tenant's run is E_NOT_FOUND; a sealed run E_SEALED; a run graded, still grading or ended
 * otherwise E_CONFLICT; a request already open answers `duplicate`.
 */
@Injectable()
export class RegradeRunHandler {
  constructor(@Inject(EVIDENCE_LOG) private readonly log: EvidenceLog) {}

  handle(command: RegradeRunCommand): Promise<Omit<CommandOk, 'ok'>> {
    return decideOnStableHead(() => this.decideAndAppend(command));
  }

  private async decideAndAppend(command: RegradeRunCommand): Promise<Omit<CommandOk, 'ok'>> {
    const runId = command.run_id;
    const { view, receipts, headSeq } = await readCommandedRun(this.log, runId, command.tenant);
    const path = regradePath(view, receipts);
    switch (path.kind) {
      case 'sealed':
        throw new CairnError('E_SEALED', `run ${runId} is sealed`, { runId });
      case 'not_failed':
        throw new CairnError('E_CONFLICT', `run ${runId} cannot be graded again: ${path.reason}`, { runId, state: path.state });
      case 'not_retryable':
        throw new CairnError('E_CONFLICT', `run ${runId} cannot be graded again: its grading failed for good`, { runId, state: view.state });
      case 'requested':
        return { run_id: runId, duplicate: true };
      case 'regrade': {
        const fields = { requested_by: command.requested_by, ...(command.reason === undefined ? {} : { reason: command.reason }) };
        checkEventFields('grade.requested', { chainId: runId, tenant: view.tenant, actor: INTAKE_ACTOR, causation: null }, fields);
        const appended = await this.log.append(
          runId,
          { type: 'grade.requested', actor: INTAKE_ACTOR, tenant: view.tenant, causation: null, key: path.key, fields },
          { expectedHeadSeq: headSeq },
        );
        return { run_id: runId, duplicate: appended.duplicate };
      }
    }
  }
}
