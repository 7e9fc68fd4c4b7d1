import { NatsArtifactStore } from '@cairn/artifact-store';
import type { ArtifactStore } from '@cairn/artifact-store';
import type { ArtifactReadConfig } from '@cairn/config';
import { isCairnError } from '@cairn/contracts';
import type { Provider } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import type { JsonLogger } from './json-logger.js';
import type { LoadedArtifact } from './run-outputs.reader.js';
import { NATS_CONNECTION, SERVICE_LOGGER } from './service.tokens.js';

export type ArtifactReadLimits = {
  /** Largest single artifact read, in bytes. */
  maxArtifactBytes: number;
  /** All of one run's artifacts together, in bytes. */
  maxRunBytes: number;
};

/**
 * Reads a run's artifacts from the content-addressed store, bounded: an artifact past the
 * per-artifact bound, or past what is left of the per-run bound, is not read (`too_large`). Every
 * read re-hashes the bytes (`ArtifactStore.get`), so `ok` means "hashes to its name"; missing
 * and corrupt bytes are results, not errors. Other IO failures are thrown (the reaction retries).
 */
export class ArtifactLoader {
  constructor(
    private readonly store: ArtifactStore,
    private readonly limits: ArtifactReadLimits,
  ) {}

  /**
   * The loader of a service that reads artifacts (kernel, verifier, grader): over NATS, from the
   * object store CAIRN_ARTIFACT_BUCKET names, wherever the runtime that wrote them runs.
   */
  static provider(config: ArtifactReadConfig): Provider {
    return {
      provide: ArtifactLoader,
      inject: [NATS_CONNECTION, SERVICE_LOGGER],
      useFactory: async (nc: NatsConnection, logger: JsonLogger) => {
        const store = await NatsArtifactStore.open(nc, { bucket: config.CAIRN_ARTIFACT_BUCKET });
        logger.write('info', 'reading artifacts', { bucket: store.bucket });
        return new ArtifactLoader(store, { maxArtifactBytes: config.CAIRN_ARTIFACT_READ_MAX_BYTES, maxRunBytes: config.CAIRN_RUN_READ_MAX_BYTES });
      },
    };
  }

  /** Each distinct sha256, in the order given (the order decides which reads the run bound stops). */
  async load(shas: Iterable<string>): Promise<Map<string, LoadedArtifact>> {
    const loaded = new Map<string, LoadedArtifact>();
    let total = 0;
    for (const sha of shas) {
      if (loaded.has(sha)) continue;
      const size = await this.store.sizeOf(sha);
      if (size === null) {
        loaded.set(sha, { state: 'missing' });
        continue;
      }
      if (size > this.limits.maxArtifactBytes || total + size > this.limits.maxRunBytes) {
        loaded.set(sha, { state: 'too_large', bytes: size });
        continue;
      }
      const artifact = await this.read(sha);
      if (artifact.state === 'ok') total += artifact.bytes.byteLength;
      loaded.set(sha, artifact);
    }
    return loaded;
  }

  private async read(sha: string): Promise<LoadedArtifact> {
    try {
      return { state: 'ok', bytes: await this.store.get(sha) };
    } catch (error) {
      if (isCairnError(error) && error.code === 'E_NOT_FOUND') return { state: 'missing' };
      const actual = isCairnError(error) && error.code === 'E_INTERNAL' ? error.details?.actual : undefined;
      if (typeof actual === 'string') return { state: 'corrupt', actual };
      throw error;
    }
  }
}
