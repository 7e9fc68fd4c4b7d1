import type { ArtifactStore, VerifiedArtifact } from '@cairn/artifact-store';
import { CairnError, isCairnError } from '@cairn/contracts';
import type { OutputStream, RecordedStream, RunArtifacts } from '@cairn/contracts';
import { JsonLogger } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { Principal } from '../auth/api-key.store.js';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG } from '../gateway.tokens.js';
import { RunReadsRepository } from '../runs/run-reads.repository.js';
import { SandboxReadsRepository } from '../sandboxes/sandbox-reads.repository.js';
import { attachmentDisposition, fileMediaType, streamMediaType } from './output-media.js';
import { checkReader, EXEC_OUTPUT_RECEIPTS, execOutputsOf, execStreamSha, fileSha, RUN_OUTPUT_RECEIPTS, runOutputsOf, stepStreamSha } from './recorded-outputs.js';
import type { RunOutputs } from './recorded-outputs.js';

export const GATEWAY_ARTIFACTS = Symbol('GATEWAY_ARTIFACTS');

/** An output ready to go out: checked against the chain's sha256, not yet sent. */
export interface ServedOutput {
  artifact: VerifiedArtifact;
  mediaType: string;
  /** Set for files: they go as attachments. */
  disposition: string | null;
  /** What the logs name if serving it fails. */
  what: Record<string, unknown>;
}

/**
 * Reads what a run printed and wrote (and a sandbox's exec output) out of the artifact store, by
 * the sha256 its receipts record, for the caller's tenant only (another tenant's run is 404) and,
 * for a chain that mounts secrets, for its holder and admin keys only. Every byte is checked
 * against that sha256 before it is served (ArtifactStore.openVerified); bytes that no longer
 * match are refused E_INTERNAL and logged fatal — the chain is intact, the store is not.
 */
@Injectable()
export class RunOutputsService {
  constructor(
    private readonly runs: RunReadsRepository,
    private readonly sandboxes: SandboxReadsRepository,
    @Inject(GATEWAY_ARTIFACTS) private readonly store: ArtifactStore,
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
    private readonly logger: JsonLogger,
  ) {}

  private async runOutputs(principal: Principal, runId: string): Promise<RunOutputs> {
    await this.runs.getRun(principal.tenant, runId);
    const outputs = runOutputsOf(runId, await this.runs.receiptsOfTypes(runId, RUN_OUTPUT_RECEIPTS));
    checkReader(outputs.holder, principal, runId);
    return outputs;
  }

  async list(principal: Principal, runId: string): Promise<RunArtifacts> {
    const { run } = await this.runOutputs(principal, runId);
    const recorded = async (sha256: string, written: number, truncated: boolean): Promise<RecordedStream> => ({
      sha256,
      bytes: await this.store.sizeOf(sha256),
      writtenBytes: written,
      truncated,
    });
    const steps = await Promise.all(
      run.steps.map(async (step) => ({
        index: step.step_index,
        name: run.stepNames.get(step.step_index) ?? null,
        exitCode: step.exit_code,
        stdout: await recorded(step.stdout_sha256, step.stdout_bytes, step.output_truncated),
        stderr: await recorded(step.stderr_sha256, step.stderr_bytes, step.output_truncated),
      })),
    );
    const items = await Promise.all([...run.files].map(async ([path, sha256]) => ({ path, sha256, bytes: await this.store.sizeOf(sha256) })));
    return { runId, steps, items };
  }

  async stepStream(principal: Principal, runId: string, index: number, stream: OutputStream, attempt?: number): Promise<ServedOutput> {
    const sha = stepStreamSha(await this.runOutputs(principal, runId), runId, index, stream, attempt);
    const what = { runId, step: index, stream, sha256: sha, ...(attempt === undefined ? {} : { attempt }) };
    const artifact = await this.open(sha, what);
    return { artifact, mediaType: streamMediaType(artifact.utf8), disposition: null, what };
  }

  async file(principal: Principal, runId: string, path: string): Promise<ServedOutput> {
    const sha = fileSha(await this.runOutputs(principal, runId), runId, path);
    const what = { runId, path, sha256: sha };
    const artifact = await this.open(sha, what);
    return { artifact, mediaType: fileMediaType(path, artifact.utf8), disposition: attachmentDisposition(path), what };
  }

  async execStream(principal: Principal, sandboxId: string, execId: string, stream: OutputStream): Promise<ServedOutput> {
    await this.sandboxes.getSandbox(principal.tenant, sandboxId);
    const outputs = execOutputsOf(sandboxId, await this.runs.receiptsOfTypes(sandboxId, EXEC_OUTPUT_RECEIPTS));
    checkReader(outputs.holder, principal, sandboxId);
    const sha = execStreamSha(outputs, sandboxId, execId, stream);
    const what = { sandboxId, execId, stream, sha256: sha };
    const artifact = await this.open(sha, what);
    return { artifact, mediaType: streamMediaType(artifact.utf8), disposition: null, what };
  }

  /** A serving that failed after the check (the bytes changed under it): the answer is cut short, and this says why. */
  servingFailed(served: ServedOutput, error: unknown): void {
    this.logger.write('fatal', 'an output changed while it was served: the answer was cut short', {
      ...served.what,
      error: isCairnError(error) ? error.message : error instanceof Error ? error.message : String(error),
    });
  }

  private async open(sha256: string, what: Record<string, unknown>): Promise<VerifiedArtifact> {
    try {
      return await this.store.openVerified(sha256, { maxBytes: this.config.CAIRN_GATEWAY_ARTIFACT_MAX_BYTES });
    } catch (error) {
      if (!isCairnError(error)) throw error;
      if (error.code === 'E_INTERNAL') {
        // A critical condition, never a silent one: the store holds bytes the chain does not record.
        this.logger.write('fatal', 'an output in the artifact store does not hash to the sha256 its receipt records: refused, not served', {
          ...what,
          actual: error.details?.['actual'] ?? null,
        });
        throw new CairnError('E_INTERNAL', `the stored bytes of this output do not hash to ${sha256}, the sha256 its receipt records: they are refused, not served`, {
          ...what,
          reason: 'artifact_corrupt',
        });
      }
      if (error.code === 'E_NOT_FOUND') {
        this.logger.write('warn', 'an output its receipt records is not in the artifact store', what);
        throw new CairnError('E_NOT_FOUND', `the artifact store holds no bytes for ${sha256} (CAIRN_ARTIFACT_BUCKET ${this.config.CAIRN_ARTIFACT_BUCKET})`, { ...what, reason: 'artifact_missing' });
      }
      if (error.code === 'E_TOO_LARGE') throw new CairnError('E_TOO_LARGE', error.message, { ...what, ...error.details });
      throw error;
    }
  }
}
