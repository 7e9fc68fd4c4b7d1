import { randomBytes } from 'node:crypto';
import { BUILD_CHUNK_BYTES, buildSubject, CairnError, ImageBuildEndSchema, MAX_BUILD_CONTEXT_BYTES, OP_MESSAGE_HEADER } from '@cairn/contracts';
import type { BuiltImage, ImageBuildOp } from '@cairn/contracts';
import { inboxOf } from '@cairn/evidence-log';
import type { WorkerDrains, WorkerRegistry } from '@cairn/operational';
import { jetstream } from '@nats-io/jetstream';
import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { safeJson, serveChunks } from './wire.js';
import { chooseBuildWorker, packBuildContext } from './image-build-context.js';
import type { ContextFileBytes } from './image-build-context.js';

/*
 * Image builds a worker serves, from the gateway's side (docs/adr/0038): the worker is chosen from
 * the registry (`chooseBuildWorker`), the build is published to its work queue
 * (`<prefix>.cmd.imgbuild.<worker id>`), the context is served a chunk at a time to the worker's
 * requests, and the one answer comes back on a core-NATS inbox of this connection's.
 */

export interface ImageBuildRequest {
  tenant: string;
  requestedBy: string;
  dockerfile: string;
  files: readonly ContextFileBytes[];
  /** The image refs the Dockerfile's FROM lines name (`dockerfileBases`): a worker that has them is preferred. */
  bases: readonly string[];
  /** The build's time limit; absent: the worker's. */
  timeoutSeconds?: number;
}

export interface ImageBuilderConfig {
  /** The command bus' subject prefix (`cairn`). */
  commandSubjectPrefix: string;
  /** A worker not heard from for this long is not chosen (CAIRN_WORKER_STALE_AFTER_MS). */
  staleAfterMs?: number;
  /** How long past the build's time limit the caller waits for the answer; default 60 s. */
  graceMs?: number;
  /** The build's time limit when the request names none (the worker's CAIRN_BUILD_TIMEOUT_SECONDS may give less); default 600 s. */
  defaultTimeoutSeconds?: number;
}

export interface ImageBuilderDeps {
  nc: NatsConnection;
  registry: Pick<WorkerRegistry, 'list'>;
  drains: Pick<WorkerDrains, 'list'>;
  config: ImageBuilderConfig;
}

export class ImageBuilder {
  private readonly js: JetStreamClient;
  private readonly encoder = new TextEncoder();

  constructor(private readonly deps: ImageBuilderDeps) {
    this.js = jetstream(deps.nc);
  }

  /**
   * Has a worker build the image (or find it built) and answers its record. E_INPUT for a bad
   * context (or a FROM the worker does not have), E_TOO_LARGE past the context limit, E_TIMEOUT past
   * the build's time limit, E_RUNTIME_ABSENT when no worker is live, E_UNAVAILABLE when none answers.
   */
  async build(request: ImageBuildRequest): Promise<BuiltImage> {
    const packed = packBuildContext(request.dockerfile, request.files);
    if (packed.payload.byteLength > MAX_BUILD_CONTEXT_BYTES) {
      throw new CairnError('E_TOO_LARGE', `the build context is ${packed.payload.byteLength} bytes; at most ${MAX_BUILD_CONTEXT_BYTES}`, { bytes: packed.payload.byteLength, limit: MAX_BUILD_CONTEXT_BYTES });
    }
    const [workers, drains] = await Promise.all([this.deps.registry.list(), this.deps.drains.list()]);
    const worker = chooseBuildWorker(workers, drains, {
      bases: request.bases,
      contentSha256: packed.sha256,
      now: Date.now(),
      ...(this.deps.config.staleAfterMs === undefined ? {} : { staleAfterMs: this.deps.config.staleAfterMs }),
    });
    if (worker === null) throw new CairnError('E_RUNTIME_ABSENT', 'no live worker to build the image on: start a runtime (or lift a drain)');

    const { payload } = packed;
    const chunks = Math.max(1, Math.ceil(payload.byteLength / BUILD_CHUNK_BYTES));
    const timeoutSeconds = request.timeoutSeconds ?? this.deps.config.defaultTimeoutSeconds ?? 600;
    const waitMs = timeoutSeconds * 1000 + (this.deps.config.graceMs ?? 60_000);
    const opId = `b${randomBytes(16).toString('hex')}`;
    const replyTo = inboxOf(this.deps.nc);
    const dataSubject = inboxOf(this.deps.nc);
    const subs: Subscription[] = [];
    let timer: NodeJS.Timeout | undefined;
    // The worker pulls the chunks, one request each, so nothing is sent that nobody reads.
    subs.push(serveChunks(this.deps.nc, dataSubject, payload, BUILD_CHUNK_BYTES));
    const ended = new Promise<BuiltImage>((resolve, reject) => {
      subs.push(
        this.deps.nc.subscribe(replyTo, {
          callback: (error, msg) => {
            if (error !== null) {
              reject(new CairnError('E_UNAVAILABLE', `the answer to the image build on worker ${worker.workerId} was lost: ${error.message}`));
              return;
            }
            if (msg.headers?.get(OP_MESSAGE_HEADER) !== 'end') return;
            const parsed = ImageBuildEndSchema.safeParse(safeJson(msg.data));
            if (!parsed.success) reject(new CairnError('E_INTERNAL', `the answer to the image build on worker ${worker.workerId} does not match its contract`));
            else if (!parsed.data.ok) reject(new CairnError(parsed.data.error.code, parsed.data.error.message, { ...parsed.data.error.details, workerId: worker.workerId }));
            else resolve(parsed.data.build);
          },
        }),
      );
      timer = setTimeout(() => reject(new CairnError('E_UNAVAILABLE', `no answer to the image build from worker ${worker.workerId} within ${waitMs} ms`, { workerId: worker.workerId })), waitMs);
    });
    const op: ImageBuildOp = {
      op_id: opId,
      tenant: request.tenant,
      requested_by: request.requestedBy,
      reply_to: replyTo,
      expires_at: new Date(Date.now() + waitMs).toISOString(),
      // Always named: the worker then stops the build by the time this caller stops waiting for it.
      timeout_seconds: timeoutSeconds,
      dockerfile_bytes: packed.dockerfileBytes,
      files: packed.files,
      bytes: payload.byteLength,
      sha256: packed.sha256,
      data_subject: dataSubject,
      chunks,
    };
    try {
      await this.js.publish(buildSubject(this.deps.config.commandSubjectPrefix, worker.workerId), this.encoder.encode(JSON.stringify(op)), { msgID: opId, timeout: 5000 }).catch((error: unknown) => {
        throw new CairnError('E_UNAVAILABLE', `cannot send the image build to worker ${worker.workerId}: ${error instanceof Error ? error.message : String(error)}`, { workerId: worker.workerId });
      });
      const built = await ended;
      if (built.worker_id !== worker.workerId) throw new CairnError('E_INTERNAL', `the image build sent to worker ${worker.workerId} was answered by ${built.worker_id}`);
      return built;
    } finally {
      clearTimeout(timer);
      for (const sub of subs) sub.unsubscribe();
      // Settled: a rejection after the answer (or the send's failure) is nobody's to hear.
      ended.catch(() => undefined);
    }
  }
}

