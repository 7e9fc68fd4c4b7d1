import { CairnError, parseSandboxSpec } from '@cairn/contracts';
import type { CommandOk, CreateSandboxCommand, ReceiptEnvelope } from '@cairn/contracts';
import { foldSandbox } from '@cairn/lifecycle';
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
      const request = { tenant: command.tenant, keySha256: sha256Hex(`sandbox:${command.idempotency_key_sha256}`), bodySha256: specSha256, runId: sandboxId };
      const claim = await this.keys.claim(request);
      if (claim.kind === 'mismatch') throw new CairnError('E_IDEMPOTENCY_MISMATCH', 'this Idempotency-Key was used before with a different request body');
      sandboxId = claim.runId;
      if ((await this.log.head(sandboxId)) !== null) {
        // A create refused for want of room, or deleted before anyone used it (its caller gave up,
        // perhaps after it was made), left nothing: a retry under the same key, after Retry-After, is
        // a new try rather than the same refusal (or a destroyed sandbox) for ever.
        if (!(await this.endedUnused(sandboxId))) return { run_id: sandboxId, duplicate: true };
        const fresh = newSandboxId(now);
        const retried = await this.keys.reclaim({ ...request, runId: fresh }, sandboxId);
        // Another retry moved the key first: that one makes the sandbox.
        if (retried !== fresh) return { run_id: retried, duplicate: true };
        sandboxId = fresh;
      }
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

  /**
   * Whether the sandbox ended leaving nothing anyone used: refused for room or a runtime before it
   * was made, or deleted with no operation run in it (while it waited, or once ready: a create
   * whose caller gave up deletes what it made, and its retry must not be answered with that).
   */
  private async endedUnused(sandboxId: string): Promise<boolean> {
    const raw: ReceiptEnvelope[] = [];
    for await (const stored of this.log.readChain(sandboxId)) raw.push(stored.receipt);
    const view = foldSandbox(raw);
    if (view === null) return false;
    if (view.state === 'FAILED') return view.readyAt === null && (view.errorCode === 'E_CAPACITY' || view.errorCode === 'E_RUNTIME_ABSENT');
    return view.state === 'DESTROYED' && view.destroyReason === 'deleted' && view.operations === 0;
  }
}
