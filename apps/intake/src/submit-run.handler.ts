import { CairnError, parseRunSpec } from '@cairn/contracts';
import type { CommandOk, RunSpec, SubmitRunCommand } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import type { EvidenceLog } from '@cairn/evidence-log';
import { assertNoLiteralKeys } from '@cairn/secrets';
import { EVIDENCE_LOG } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import { checkEventFields } from './event-fields.check.js';
import { IdempotencyRepository } from './idempotency.repository.js';
import { newRunId } from './run-id.js';

export const INTAKE_ACTOR = 'intake';

/**
 * `cairn.cmd.submit`: validate the spec again (fail closed) and refuse one holding a literal key
 * pattern (`@cairn/secrets`), claim the idempotency key, and start
 * the run's chain with `run.submitted`. A crash between the claim and the append is safe: the
 * redelivered command finds the same run id with an empty chain and appends then, and the append's
 * message id (chain, no causation, type) makes a repeated append store nothing.
 */
@Injectable()
export class SubmitRunHandler {
  constructor(
    private readonly keys: IdempotencyRepository,
    @Inject(EVIDENCE_LOG) private readonly log: EvidenceLog,
  ) {}

  async handle(command: SubmitRunCommand): Promise<Omit<CommandOk, 'ok'>> {
    const spec = parseRunSpec(command.spec);
    // A literal credential never reaches the chain: it belongs in the secret store (E_INPUT, nothing appended).
    assertNoLiteralKeys(spec);
    const specSha256 = sha256Hex(canonicalJson(spec));
    const claim = await this.keys.claim({
      tenant: command.tenant,
      keySha256: command.idempotency_key_sha256,
      bodySha256: idempotencyBodySha256(spec),
      runId: newRunId(),
    });
    if (claim.kind === 'mismatch') {
      throw new CairnError('E_IDEMPOTENCY_MISMATCH', 'this Idempotency-Key was used before with a different request body');
    }
    const runId = claim.runId;
    // A chain already started: this is a resubmission, and nothing new happens.
    if ((await this.log.head(runId)) !== null) return { run_id: runId, duplicate: true };

    const fields = {
      spec,
      spec_sha256: specSha256,
      submitted_by: command.submitted_by,
      idempotency_key_sha256: command.idempotency_key_sha256,
      // Who asked, for policy's secret decisions; a command without it (an older gateway) records none.
      ...(command.principal === undefined ? {} : { principal: command.principal }),
    };
    checkEventFields('run.submitted', { chainId: runId, tenant: command.tenant, actor: INTAKE_ACTOR, causation: null }, fields);
    // Guarded on the empty chain: `run.submitted` is only ever first.
    const appended = await this.log.append(runId, { type: 'run.submitted', actor: INTAKE_ACTOR, tenant: command.tenant, causation: null, fields }, { expectedHeadSeq: 0 });
    return { run_id: runId, duplicate: appended.duplicate };
  }
}

/**
 * What an Idempotency-Key is compared on: the spec, but for whether its image was built for it or
 * found built (`imageBuild.cached`, docs/adr/0038). A Harbor task sent again under its key has its
 * image found built the second time; it is the same request, and answers the same run.
 */
export function idempotencyBodySha256(spec: RunSpec): string {
  if (spec.imageBuild === undefined) return sha256Hex(canonicalJson(spec));
  const { cached: _cached, ...build } = spec.imageBuild;
  return sha256Hex(canonicalJson({ ...spec, imageBuild: build }));
}
