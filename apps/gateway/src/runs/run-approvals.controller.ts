import { API_ROUTES, ApprovalRequestSchema, RunIdSchema } from '@cairn/contracts';
import type { ApprovalAccepted, ApprovalRequest } from '@cairn/contracts';
import { Body, Controller, Param } from '@nestjs/common';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { RunApprovals } from './run-approvals.service.js';

/** `POST /v1/runs/:id/approvals`: the `approve` scope; the decision is intake's to record. */
@Controller()
export class RunApprovalsController {
  constructor(private readonly approvals: RunApprovals) {}

  @ApiRoute(API_ROUTES.decideApproval)
  async decide(
    @CurrentPrincipal() principal: Principal,
    @Param('id', { schema: RunIdSchema }) runId: string,
    @Body({ schema: ApprovalRequestSchema }) body: ApprovalRequest,
  ): Promise<ApprovalAccepted> {
    const { duplicate } = await this.approvals.decide(principal, runId, body);
    // Intake appended the decision (or had before): a rejection has ended the run, a grant left it
    // AWAITING_APPROVAL for the scheduler (or the runtime, for a step) to move on.
    return { runId, decision: body.decision, state: body.decision === 'reject' ? 'CANCELLED' : 'AWAITING_APPROVAL', duplicate };
  }
}
