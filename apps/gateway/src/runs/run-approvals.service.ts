import { CairnError } from '@cairn/contracts';
import type { ApprovalRequest } from '@cairn/contracts';
import { sha256Hex } from '@cairn/evidence';
import { CommandBus } from '@cairn/operational';
import { Inject, Injectable } from '@nestjs/common';
import type { Principal } from '../auth/api-key.store.js';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG } from '../gateway.tokens.js';

/**
 * Approval decisions go to intake as `approve` commands (docs/adr/0003), never straight onto a
 * chain: intake checks the run's tenant, that the approver did not submit it, and that the
 * approvals are still pending, then appends `approval.granted` or `approval.rejected`.
 */
@Injectable()
export class RunApprovals {
  constructor(
    private readonly bus: CommandBus,
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
  ) {}

  async decide(principal: Principal, runId: string, request: ApprovalRequest): Promise<{ duplicate: boolean }> {
    const decidedBy = `key:${principal.keyId}`;
    const reply = await this.bus.send(
      'approve',
      {
        tenant: principal.tenant,
        run_id: runId,
        decided_by: decidedBy,
        decision: request.decision,
        ...(request.approvalId === undefined ? {} : { approval_id: request.approvalId }),
        ...(request.comment === undefined ? {} : { comment: request.comment }),
      },
      // One command per approver, run, decision and approval: a client's retry is deduplicated.
      {
        msgId: sha256Hex(`approve:${principal.tenant}:${runId}:${decidedBy}:${request.decision}:${request.approvalId ?? '*'}`),
        timeoutMs: this.config.CAIRN_GATEWAY_COMMAND_TIMEOUT_MS,
      },
    );
    if (!reply.ok) throw new CairnError(reply.error.code, reply.error.message, reply.error.details);
    return { duplicate: reply.duplicate };
  }
}
