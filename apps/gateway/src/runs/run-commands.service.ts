import { randomUUID } from 'node:crypto';
import { CairnError } from '@cairn/contracts';
import type { CommandReply, RunSpec } from '@cairn/contracts';
import { sha256Hex } from '@cairn/evidence';
import { CommandBus } from '@cairn/operational';
import { Inject, Injectable } from '@nestjs/common';
import type { Principal } from '../auth/api-key.store.js';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG } from '../gateway.tokens.js';

/** The run intake created (or had created for this key before). */
export interface Submitted {
  runId: string;
  duplicate: boolean;
}

function actorOf(principal: Principal): string {
  return `key:${principal.keyId}`;
}

/** The reply's run, or its error as the CairnError it names (mapped to HTTP at the edge). */
function unwrap(reply: CommandReply): Submitted {
  if (reply.ok) return { runId: reply.run_id, duplicate: reply.duplicate };
  throw new CairnError(reply.error.code, reply.error.message, reply.error.details);
}

/**
 * The gateway's only writes: commands on the command stream for intake (docs/adr/0003). The
 * Idempotency-Key itself never leaves the gateway; the command carries its hash.
 */
@Injectable()
export class RunCommands {
  constructor(
    private readonly bus: CommandBus,
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
  ) {}

  async submit(principal: Principal, idempotencyKey: string, spec: RunSpec): Promise<Submitted> {
    const reply = await this.bus.send(
      'submit',
      {
        tenant: principal.tenant,
        submitted_by: actorOf(principal),
        idempotency_key_sha256: sha256Hex(idempotencyKey),
        spec,
        // The key's id and scopes go on run.submitted: policy decides the run's secrets from them.
        principal: { key_id: principal.keyId, scopes: [...principal.scopes] },
      },
      // Per tenant: the same key from two tenants is two submissions.
      { msgId: sha256Hex(`${principal.tenant}:${idempotencyKey}`), timeoutMs: this.config.CAIRN_GATEWAY_COMMAND_TIMEOUT_MS },
    );
    return unwrap(reply);
  }

  async cancel(principal: Principal, runId: string, reason: string | undefined): Promise<Submitted> {
    const reply = await this.bus.send(
      'cancel',
      { tenant: principal.tenant, run_id: runId, requested_by: actorOf(principal), ...(reason === undefined ? {} : { reason }) },
      { msgId: sha256Hex(`cancel:${principal.tenant}:${runId}`), timeoutMs: this.config.CAIRN_GATEWAY_COMMAND_TIMEOUT_MS },
    );
    return unwrap(reply);
  }

  /**
   * Asks intake to grade a run again (docs/adr/0030). A fresh message id each time: a run may fail
   * its grade again and be asked again within the bus's dedupe window; intake keys the receipt per
   * attempt, so racing requests store one.
   */
  async regrade(principal: Principal, runId: string, reason: string | undefined): Promise<Submitted> {
    const reply = await this.bus.send(
      'regrade',
      { tenant: principal.tenant, run_id: runId, requested_by: actorOf(principal), ...(reason === undefined ? {} : { reason }) },
      { msgId: sha256Hex(`regrade:${principal.tenant}:${runId}:${randomUUID()}`), timeoutMs: this.config.CAIRN_GATEWAY_COMMAND_TIMEOUT_MS },
    );
    return unwrap(reply);
  }
}
