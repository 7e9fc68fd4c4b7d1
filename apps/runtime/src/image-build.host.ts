import { CONSUMER_PULL_EXPIRES_MS, imageBuildsDurableOf, whileLeaderless } from '@cairn/config';
import { buildSubject, CairnError, ImageBuildOpSchema, isCairnError, OP_MESSAGE_HEADER } from '@cairn/contracts';
import type { BuiltImage, ErrorBody, ImageBuildEnd, ImageBuildOp } from '@cairn/contracts';
import { CommandBus, commandBusOptionsFromConfig } from '@cairn/operational';
import { unpackBuildContext } from '@cairn/sandbox-sessions';
import { NATS_CONNECTION, SERVICE_CONFIG, SERVICE_LOGGER } from '@cairn/service-kit';
import type { JsonLogger } from '@cairn/service-kit';
import { AckPolicy, DeliverPolicy, jetstreamManager, JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import { headers as natsHeaders, nanos } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { Inject, Injectable } from '@nestjs/common';
import type { BeforeApplicationShutdown, OnApplicationBootstrap } from '@nestjs/common';
import { pullChunks } from './chunk-pull.js';
import type { RuntimeConfig } from './runtime.config.js';
import { SANDBOX_ENGINE } from './runtime.tokens.js';
import { RuntimeWorker } from './runtime-worker.service.js';
import type { SandboxEngine } from './sandbox-engine.adapter.js';

/** What a build needs of the engine and the worker: the port the tests give a fake of. */
export interface ImageBuildPorts {
  engine: Pick<SandboxEngine, 'buildImage'>;
  /** The registry hears of the new image now, not a heartbeat later. */
  announce: () => Promise<void>;
  /** The context's bytes, pulled from the caller. */
  pull: (op: ImageBuildOp) => Promise<Uint8Array>;
  workerId: string;
  /** CAIRN_BUILD_ENABLED: false, every build is refused E_FORBIDDEN. */
  enabled?: boolean;
  maxContextBytes: number;
  maxTimeoutSeconds: number;
  now?: () => number;
}

/**
 * One build as the worker serves it (docs/adr/0038), with no NATS of its own: refused past the
 * caller's wait (E_TIMEOUT) or past the context limit (E_TOO_LARGE) before a byte is fetched; the
 * payload checked against the op; then built by the rules of `cairn images build --file` (every
 * FROM a local image, no pull, no network, cached by digest) within the time limit. No secret is
 * given to a build: no build arguments, no secret mounts, nothing from the worker's environment.
 */
export async function serveImageBuild(op: ImageBuildOp, ports: ImageBuildPorts): Promise<BuiltImage> {
  if (ports.enabled === false) throw new CairnError('E_FORBIDDEN', `worker ${ports.workerId} builds no images (CAIRN_BUILD_ENABLED=0)`);
  const now = ports.now?.() ?? Date.now();
  if (Date.parse(op.expires_at) <= now) throw new CairnError('E_TIMEOUT', 'the image build waited past its caller\'s deadline: nothing was built');
  if (op.bytes > ports.maxContextBytes) {
    throw new CairnError('E_TOO_LARGE', `the build context is ${op.bytes} bytes; worker ${ports.workerId} builds at most ${ports.maxContextBytes} (CAIRN_BUILD_MAX_CONTEXT_BYTES)`, { bytes: op.bytes, limit: ports.maxContextBytes });
  }
  const { dockerfile, files } = unpackBuildContext(op, await ports.pull(op));
  const timeoutSeconds = Math.min(op.timeout_seconds ?? ports.maxTimeoutSeconds, ports.maxTimeoutSeconds);
  const built = await ports.engine.buildImage({ dockerfile, extraFiles: files, ...(op.tag === undefined ? {} : { tag: op.tag }), timeoutMs: timeoutSeconds * 1000 });
  if (!built.cached) await ports.announce().catch(() => undefined);
  return {
    tag: built.tag,
    image_id: built.id,
    digest: built.digest,
    dockerfile_sha256: built.dockerfileSha256,
    bases: built.bases,
    cached: built.cached,
    duration_ms: built.durationMs,
    worker_id: ports.workerId,
  };
}

/** An op's build context from the caller (chunk-pull.ts); stops past the size named. */
export function pullBuildContext(nc: NatsConnection, op: ImageBuildOp): Promise<Uint8Array> {
  return pullChunks(nc, op, 'the build context');
}

/**
 * The runtime's image-build host: serves the builds sent to this worker's work-queue subject
 * (`<prefix>.cmd.imgbuild.<worker>`) one at a time — a build holds the engine for seconds to
 * minutes, and two at once on two cores only make both slower — and answers each on its `reply_to`.
 */
@Injectable()
export class ImageBuildHost implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private messages: ConsumerMessages | null = null;
  private loop: Promise<void> | null = null;

  constructor(
    @Inject(SERVICE_CONFIG) private readonly config: RuntimeConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(SANDBOX_ENGINE) private readonly engine: SandboxEngine,
    @Inject(RuntimeWorker) private readonly worker: RuntimeWorker,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const bus = await CommandBus.open(this.nc, commandBusOptionsFromConfig(this.config));
    const jsm = await jetstreamManager(this.nc);
    const durable = imageBuildsDurableOf(this.config.CAIRN_WORKER_ID);
    try {
      await whileLeaderless(() => jsm.consumers.info(bus.streamName, durable));
    } catch (error) {
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw error;
      await whileLeaderless(() =>
        jsm.consumers.add(bus.streamName, {
          durable_name: durable,
          filter_subject: buildSubject(bus.subjectPrefix, this.config.CAIRN_WORKER_ID),
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          ack_wait: nanos(30_000),
          max_ack_pending: 1,
          // A build the worker died in is not tried again: its caller has an answer (no answer) by then.
          max_deliver: 2,
        }),
      );
    }
    const consumer = await whileLeaderless(() => jsm.jetstream().consumers.get(bus.streamName, durable));
    this.messages = await consumer.consume({ max_messages: 1, expires: CONSUMER_PULL_EXPIRES_MS });
    this.loop = this.take(this.messages).catch((error: unknown) => {
      this.logger.write('fatal', 'stopped serving image builds: the consumer failed', { error: String(error) });
    });
  }

  async beforeApplicationShutdown(): Promise<void> {
    if (this.messages === null) return;
    await this.messages.close();
    await this.loop;
    this.messages = null;
  }

  private async take(messages: ConsumerMessages): Promise<void> {
    // One at a time: the next build is taken when this one is answered.
    for await (const msg of messages) await this.dispatch(msg);
  }

  private async dispatch(msg: JsMsg): Promise<void> {
    const parsed = ImageBuildOpSchema.safeParse(safeJson(msg.data));
    if (!parsed.success) {
      this.logger.write('warn', 'dropping an image build that breaks its contract', { stream_seq: msg.seq });
      msg.term('invalid');
      return;
    }
    const op = parsed.data;
    const keepAlive = setInterval(() => msg.working(), 10_000);
    let end: ImageBuildEnd;
    try {
      const build = await serveImageBuild(op, {
        engine: this.engine,
        announce: () => this.worker.heartbeatNow(),
        pull: (o) => pullBuildContext(this.nc, o),
        workerId: this.config.CAIRN_WORKER_ID,
        enabled: this.config.CAIRN_BUILD_ENABLED,
        maxContextBytes: this.config.CAIRN_BUILD_MAX_CONTEXT_BYTES,
        maxTimeoutSeconds: this.config.CAIRN_BUILD_TIMEOUT_SECONDS,
      });
      end = { ok: true, build };
      this.logger.write('info', 'image built', { op_id: op.op_id, tenant: op.tenant, requested_by: op.requested_by, tag: build.tag, image_id: build.image_id, cached: build.cached, duration_ms: build.duration_ms });
    } catch (error) {
      const body = errorBody(error);
      end = { ok: false, error: body };
      this.logger.write('warn', 'image build refused or failed', { op_id: op.op_id, tenant: op.tenant, requested_by: op.requested_by, code: body.code, message: body.message.slice(0, 512) });
    } finally {
      clearInterval(keepAlive);
    }
    const hdrs = natsHeaders();
    hdrs.set(OP_MESSAGE_HEADER, 'end');
    this.nc.publish(op.reply_to, new TextEncoder().encode(JSON.stringify(end)), { headers: hdrs });
    msg.ack();
  }
}

function errorBody(error: unknown): ErrorBody {
  if (isCairnError(error)) {
    const body = error.toBody();
    // The engine's build log tail stays in the worker's log, not in an answer a client reads.
    return { code: body.code, message: body.message.slice(0, 4096), ...(body.details === undefined ? {} : { details: pickDetails(body.details) }) };
  }
  return { code: 'E_INTERNAL', message: error instanceof Error ? error.message : String(error) };
}

function pickDetails(details: Record<string, unknown>): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const key of ['image', 'instruction', 'path', 'bytes', 'limit', 'timeoutMs', 'tail']) if (key in details) kept[key] = details[key];
  return kept;
}

function safeJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    return null;
  }
}
