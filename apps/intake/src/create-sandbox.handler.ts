import { CairnError, parseSandboxSpec } from '@cairn/contracts';
import type { CommandOk, CreateSandboxCommand } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import type { EvidenceLog } from '@cairn/evidence-log';
import { assertNoLiteralKeys } from '@cairn/secrets';
import { EVIDENCE_LOG, SERVICE_CONFIG } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import { checkEventFields } from './event-fields.check.js';
import { IdempotencyRepository } from './idempotency.repository.js';
import type { IntakeConfig } from './intake.config.js';
import { newSandboxId } from './run-id.js';
import { INTAKE_ACTOR } from './submit-run.handler.js';

/**
 * `cairn.cmd.sandbox_create`: validate the spec again (fail closed), refuse a literal key, claim
 * the idempotency key (in its own namespace, so one key cannot name both a run and a sandbox) and
 * start the sandbox's chain with `sandbox.requested`, its time to live and idle limit settled
 * (the operator's defaults where the spec names none). Idempotent like `submit`.
 */
@Injectable()
export class CreateSandboxHandler {
  constructor(
    private readonly keys: IdempotencyRepository,
    @Inject(EVIDENCE_LOG) private readonly log: EvidenceLog,
    @Inject(SERVICE_CONFIG) private readonly config: IntakeConfig,
  ) {}

  async handle(command: CreateSandboxCommand, now: number = Date.now()): Promise<Omit<CommandOk, 'ok'>> {
    const spec = parseSandboxSpec(command.spec);
    assertNoLiteralKeys(spec);
    const specSha256 = sha256Hex(canonicalJson(spec));
    let sandboxId = newSandboxId(now);
    if (command.idempotency_key_sha256 !== undefined) {
      const claim = await this.keys.claim({
        tenant: command.tenant,
        keySha256: sha256Hex(`sandbox:${command.idempotency_key_sha256}`),
        bodySha256: specSha256,
        runId: sandboxId,
      });
      if (claim.kind === 'mismatch') throw new CairnError('E_IDEMPOTENCY_MISMATCH', 'this Idempotency-Key was used before with a different request body');
      sandboxId = claim.runId;
      if ((await this.log.head(sandboxId)) !== null) return { run_id: sandboxId, duplicate: true };
    }
    const ttlSeconds = spec.ttlSeconds ?? this.config.CAIRN_SANDBOX_DEFAULT_TTL_SECONDS;
    const fields = {
      spec,
      spec_sha256: specSha256,
      requested_by: command.requested_by,
      ...(command.idempotency_key_sha256 === undefined ? {} : { idempotency_key_sha256: command.idempotency_key_sha256 }),
      ...(command.principal === undefined ? {} : { principal: command.principal }),
      expires_at: new Date(now + ttlSeconds * 1000).toISOString(),
      idle_seconds: spec.idleSeconds ?? this.config.CAIRN_SANDBOX_DEFAULT_IDLE_SECONDS,
    };
    checkEventFields('sandbox.requested', { chainId: sandboxId, tenant: command.tenant, actor: INTAKE_ACTOR, causation: null }, fields);
    const appended = await this.log.append(
      sandboxId,
      { type: 'sandbox.requested', actor: INTAKE_ACTOR, tenant: command.tenant, causation: null, fields },
      { expectedHeadSeq: 0 },
    );
    return { run_id: sandboxId, duplicate: appended.duplicate };
  }
}
