import { CONSUMER_PULL_EXPIRES_MS, whileLeaderless } from '@cairn/config';
import type { ArtifactStore } from '@cairn/artifact-store';
import { CairnError, isCairnError, OP_MESSAGE_HEADER, opSubject, SandboxOpSchema } from '@cairn/contracts';
import type { ErrorCode, EvidenceReceiptOf, SandboxHardening, SandboxOp } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import { readSandboxChain } from '@cairn/lifecycle';
import type { SandboxView } from '@cairn/lifecycle';
import { CommandBus, commandBusOptionsFromConfig } from '@cairn/operational';
import type { LeaseStore } from '@cairn/operational';
import { splitImageRef } from '@cairn/policy';
import type { SandboxHandle } from '@cairn/sandbox';
import type { EgressDenial } from '@cairn/sandbox-docker';
import { OutputScanner } from '@cairn/secrets';
import type { ScannedSecret } from '@cairn/secrets';
import { EVIDENCE_LOG, NATS_CONNECTION, ReactionContext, SERVICE_CONFIG, SERVICE_LOGGER, SERVICE_NAME } from '@cairn/service-kit';
import type { JsonLogger } from '@cairn/service-kit';
import { AckPolicy, DeliverPolicy, jetstreamManager, JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import { headers as natsHeaders, nanos } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { Inject, Injectable } from '@nestjs/common';
import type { BeforeApplicationShutdown, OnApplicationBootstrap } from '@nestjs/common';
import { inputFile, secretsAllowedBy } from './run-assessment.js';
import { runFailedFields, sandboxCaps, sandboxCreatedFields, sandboxDestroyedFields } from './runtime-receipts.builder.js';
import type { RuntimeConfig } from './runtime.config.js';
import { ARTIFACT_STORE, LEASE_STORE, RUNTIME_SECRETS, SANDBOX_ENGINE } from './runtime.tokens.js';
import { RuntimeWorker } from './runtime-worker.service.js';
import { SecretValuesReader } from '@cairn/secret-store';
import { confirmedHardening } from './sandbox-hardening.js';
import type { SandboxEngine } from './sandbox-engine.adapter.js';
import { SandboxSession } from './sandbox-session.js';
import { LeakGuard } from './leak-guard.js';

/** The PID 1 of a session's sandbox outlives its time to live by this much, so teardown is never raced. */
const LIFETIME_MARGIN_SECONDS = 300;

/**
 * The runtime's session host (docs/sandboxes.md, docs/adr/0006-sandbox-sessions.md): starts the
 * sandbox of a session placed on this worker and keeps it for the session's life, serves the ops
 * sent to this worker's work-queue subject (`<prefix>.cmd.sbxop.<worker>`) — each session's one at
 * a time — and ends on the record the sessions it finds held here but not live (a restart).
 */
@Injectable()
export class SandboxSessionHost implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly sessions = new Map<string, SandboxSession>();
  private messages: ConsumerMessages | null = null;
  private loop: Promise<void> | null = null;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    @Inject(SERVICE_CONFIG) private readonly config: RuntimeConfig,
    @Inject(SERVICE_NAME) private readonly service: string,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
    @Inject(EVIDENCE_LOG) private readonly log: EvidenceLog,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(SANDBOX_ENGINE) private readonly engine: SandboxEngine,
    @Inject(ARTIFACT_STORE) private readonly artifacts: ArtifactStore,
    @Inject(LEASE_STORE) private readonly leases: LeaseStore,
    @Inject(RuntimeWorker) private readonly worker: RuntimeWorker,
    @Inject(RUNTIME_SECRETS) private readonly secrets: SecretValuesReader,
  ) {}

  /** Live sessions here (for tests and logs). */
  get liveCount(): number {
    return this.sessions.size;
  }

  async onApplicationBootstrap(): Promise<void> {
    // The command stream exists (created or checked) before this worker's consumer is made on it.
    const bus = await CommandBus.open(this.nc, commandBusOptionsFromConfig(this.config));
    const jsm = await jetstreamManager(this.nc);
    const durable = opsDurableName(this.config.CAIRN_WORKER_ID);
    const subject = opSubject(bus.subjectPrefix, this.config.CAIRN_WORKER_ID);
    const concurrency = this.config.CAIRN_SANDBOX_OP_CONCURRENCY;
    try {
      await whileLeaderless(() => jsm.consumers.info(bus.streamName, durable));
    } catch (error) {
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw error;
      await whileLeaderless(() => jsm.consumers.add(bus.streamName, {
        durable_name: durable,
        filter_subject: subject,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: nanos(30_000),
        max_ack_pending: concurrency * 4,
        max_deliver: -1,
      }));
    }
    const consumer = await whileLeaderless(() => jsm.jetstream().consumers.get(bus.streamName, durable));
    this.messages = await consumer.consume({ max_messages: concurrency * 2, expires: CONSUMER_PULL_EXPIRES_MS });
    this.loop = this.take(this.messages, concurrency).catch((error: unknown) => {
      this.logger.write('fatal', 'stopped serving sandbox operations: the consumer failed', { error: String(error) });
    });
    await this.reconcile();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.stop();
  }

  /** Sessions this worker holds a lease of but does not serve (a restart): each ends on the record. */
  async reconcile(): Promise<string[]> {
    const lost: string[] = [];
    for (const lease of await this.leases.list()) {
      if (lease.worker_id !== this.config.CAIRN_WORKER_ID || !lease.run_id.startsWith('sbx_') || this.sessions.has(lease.run_id)) continue;
      try {
        const raw: unknown[] = [];
        for await (const stored of this.log.readChain(lease.run_id)) raw.push(stored.receipt);
        const chain = readSandboxChain(raw);
        const placement = chain?.receipts.findLast((r): r is EvidenceReceiptOf<'run.scheduled'> => r.type === 'run.scheduled');
        if (chain?.view == null || placement === undefined || placement.lease_id !== lease.lease_id) continue;
        const created = chain.receipts.find((r): r is EvidenceReceiptOf<'sandbox.created'> => r.type === 'sandbox.created');
        const ctx = new ReactionContext(placement, this.service, this.log, () => undefined);
        if ((await this.settleLost(ctx, chain.view, placement, created?.container_name ?? `cairn-${lease.run_id}`)) === 'failed') lost.push(lease.run_id);
      } catch (error) {
        this.logger.write('error', 'could not reconcile a sandbox session', { sandbox_id: lease.run_id, error: describe(error) });
      }
    }
    return lost;
  }

  /**
   * Stops taking ops, then ends every live session (`worker_lost`: nobody will serve it) — called
   * by the worker's drain, after which nothing here holds a sandbox.
   */
  async stop(): Promise<void> {
    if (this.messages !== null) {
      await this.messages.close();
      await this.loop;
      this.messages = null;
    }
    await Promise.allSettled([...this.sessions.values()].map((session) => session.shutdown('worker_lost')));
    await Promise.allSettled([...this.inFlight]);
  }

  private async take(messages: ConsumerMessages, concurrency: number): Promise<void> {
    for await (const msg of messages) {
      while (this.inFlight.size >= concurrency) await Promise.race(this.inFlight);
      // Queued on its session now, in delivery order: one sandbox's ops keep the order they came in.
      const task = this.dispatch(msg).finally(() => this.inFlight.delete(task));
      this.inFlight.add(task);
    }
  }

  private async dispatch(msg: JsMsg): Promise<void> {
    const parsed = SandboxOpSchema.safeParse(safeJson(msg.data));
    if (!parsed.success) {
      this.logger.write('warn', 'dropping a sandbox op that breaks its contract', { stream_seq: msg.seq });
      msg.term('invalid');
      return;
    }
    const op: SandboxOp = parsed.data;
    const session = this.sessions.get(op.sandbox_id);
    if (session === undefined || !session.live || session.tenant !== op.tenant) {
      answerError(this.nc, op.reply_to, 'E_CONFLICT', `sandbox ${op.sandbox_id} is not live on worker ${this.config.CAIRN_WORKER_ID}`);
      msg.ack();
      return;
    }
    const keepAlive = setInterval(() => msg.working(), 10_000);
    try {
      await session.serve(op);
    } finally {
      clearInterval(keepAlive);
      msg.ack();
    }
  }

  /**
   * A session placed on this worker (`run.scheduled`): check the chain and the lease, create the
   * sandbox (a warm one when the pool has it), record `sandbox.created`, and hand the session its
   * setup (files, secrets) as its first operation. Returns once the session is live (or refused):
   * the session then lives on here, not in the reaction.
   */
  async start(ctx: ReactionContext, scheduled: EvidenceReceiptOf<'run.scheduled'>): Promise<void> {
    if (this.sessions.has(ctx.chainId)) return;
    const timings = new Stopwatch();
    // Every append below is guarded on this head: the chain as delivered serves (reaction-context.ts).
    const { receipts, headSeq } = await ctx.deliveredSnapshot();
    timings.mark('chain');
    const chain = readSandboxChain(receipts);
    if (chain === null || chain.invalidSeqs.length > 0 || chain.view === null) {
      this.logger.write('error', 'not starting a sandbox chain that breaks its contract', { sandbox_id: ctx.chainId });
      return;
    }
    const view = chain.view;
    const lastPlacement = chain.receipts.findLast((r): r is EvidenceReceiptOf<'run.scheduled'> => r.type === 'run.scheduled');
    if (lastPlacement?.lease_id !== scheduled.lease_id || scheduled.worker_id !== this.config.CAIRN_WORKER_ID) return;
    if (view.state === 'READY') {
      // Created here before, and not live now: this worker restarted under it.
      const created = chain.receipts.find((r): r is EvidenceReceiptOf<'sandbox.created'> => r.type === 'sandbox.created');
      await this.settleLost(ctx, view, scheduled, created?.container_name ?? `cairn-${view.id}`);
      return;
    }
    if (view.state !== 'PENDING' || view.sealed) return;
    const requested = chain.receipts.find((r): r is EvidenceReceiptOf<'sandbox.requested'> => r.type === 'sandbox.requested');
    const decided = chain.receipts.find((r): r is EvidenceReceiptOf<'policy.decided'> => r.type === 'policy.decided');
    if (requested === undefined || decided === undefined || decided.decision !== 'allow' || decided.caps === undefined || decided.image === undefined) {
      await ctx.appendAt(headSeq, 'run.failed', runFailedFields('E_UNKNOWN_STATE', 'the sandbox was placed without an allowing policy decision'), 'failed');
      return;
    }
    const caps = decided.caps;
    const { name: image, digest } = splitImageRef(decided.image);
    const allowed = secretsAllowedBy(requested.spec.secrets ?? [], decided);
    if (!allowed.ok) {
      await ctx.appendAt(headSeq, 'run.failed', runFailedFields('E_POLICY_DENIED', allowed.message), 'failed');
      await this.leases.delete(ctx.chainId, scheduled.lease_id).catch(() => false);
      return;
    }
    const secretNames = allowed.names;
    // Independent of each other, so at once: the lease (ours?), the image's id (which also says
    // whether an engine answers: an absent one is E_RUNTIME_ABSENT), the secrets' values.
    const [renewed, resolved, secretsRead] = await Promise.all([
      settle(this.leases.renew(ctx.chainId, this.config.CAIRN_WORKER_ID, Date.now() + this.config.CAIRN_LEASE_TTL_MS)),
      settle(this.engine.imageId(image, digest)),
      secretNames.length === 0 ? settle(Promise.resolve<ScannedSecret[]>([])) : settle(this.secrets.read(requested.tenant, secretNames)),
    ]);
    timings.mark('lease+image+secrets');
    let secretValues: ScannedSecret[] = secretsRead.ok ? secretsRead.value : [];
    if (!renewed.ok || renewed.value.lease_id !== scheduled.lease_id) {
      for (const secret of secretValues) secret.value.fill(0);
      this.logger.write('warn', 'not starting a sandbox whose lease is not ours', { sandbox_id: ctx.chainId });
      return;
    }
    let handle: SandboxHandle | null = null;
    const fail = async (code: ErrorCode, message: string): Promise<void> => {
      if (handle !== null) await this.engine.driver.destroy(handle).catch(() => undefined);
      for (const secret of secretValues) secret.value.fill(0);
      await ctx.appendAt(headSeq, 'run.failed', runFailedFields(code, message), 'failed');
      await this.leases.delete(ctx.chainId, scheduled.lease_id).catch(() => false);
      this.logger.write('warn', 'sandbox session refused before start', { sandbox_id: ctx.chainId, code, message });
    };
    if (!resolved.ok) {
      const error = resolved.error;
      await fail(isCairnError(error) && error.code === 'E_RUNTIME_ABSENT' ? 'E_RUNTIME_ABSENT' : 'E_IMAGE_PULL', describe(error));
      return;
    }
    const imageId = resolved.value;
    if (digest !== null && digest !== imageId) {
      await fail('E_IMAGE_PULL', `image ${image} on worker ${this.config.CAIRN_WORKER_ID} is ${imageId}, not the granted ${digest}`);
      return;
    }
    if (!secretsRead.ok) {
      const error = secretsRead.error;
      if (isCairnError(error) && error.code === 'E_UNAVAILABLE') throw error;
      // A name gone since policy allowed it is a refusal; a value that does not open (edited, moved) is E_INTERNAL, as for a run.
      const code: ErrorCode = isCairnError(error) && error.code === 'E_NOT_FOUND' ? 'E_POLICY_DENIED' : isCairnError(error) && error.code === 'E_INTERNAL' ? 'E_INTERNAL' : 'E_RUNTIME_ABSENT';
      await fail(code, `the sandbox's secrets cannot be provided: ${describe(error)}`);
      return;
    }
    secretValues = secretsRead.value;
    const network = decided.network === undefined ? null : decided.network;
    // One scanner and guard for the session's life: the egress proxy's denials meet it before the session exists.
    const scanner = new OutputScanner(secretValues);
    let live: SandboxSession | null = null;
    const guard = new LeakGuard(
      () => scanner,
      () => live?.secretSeen(),
    );
    const ttlSeconds = Math.max(1, Math.ceil((Date.parse(requested.expires_at) - Date.now()) / 1000));
    let hardening: SandboxHardening;
    try {
      const egress =
        network === null
          ? undefined
          : {
              allow: network.egress,
              allowPrivate: network.allow_private,
              onDenied: (d: EgressDenial) => this.recordDenial(ctx.chainId, d, guard),
              // Its egress fails closed from here on (connections refused); the operator must hear of it.
              onProxyLost: (reason: string) => this.logger.write('error', 'the egress proxy of a sandbox session died: its egress is refused from now on', { sandbox_id: ctx.chainId, reason }),
            };
      handle = await this.engine.createSandbox(
        { image: imageId, caps: sandboxCaps(caps), labels: { workerId: this.config.CAIRN_WORKER_ID, chainId: ctx.chainId }, lifetimeSeconds: ttlSeconds + LIFETIME_MARGIN_SECONDS },
        egress,
      );
      timings.mark('sandbox');
      const engineEgress = this.engine.egressOf(handle);
      const engineNetwork = engineEgress?.network ?? 'none';
      if (network !== null && (engineNetwork === 'none' || engineEgress?.proxyAlive !== true)) throw new CairnError('E_SANDBOX_START', 'the sandbox has no egress network, or its proxy is gone');
      hardening = confirmedHardening(await this.engine.inspectSandbox(handle), handle.caps, engineNetwork);
      timings.mark('inspect');
    } catch (error) {
      await fail(isCairnError(error) && error.code === 'E_RUNTIME_ABSENT' ? 'E_RUNTIME_ABSENT' : 'E_SANDBOX_START', `the sandbox could not start: ${describe(error)}`);
      return;
    }
    const sandbox: SandboxHandle = handle;
    const session = new SandboxSession({
      ctx,
      handle: sandbox,
      caps,
      createdSeq: headSeq,
      expiresAt: Date.parse(requested.expires_at),
      ttlSeconds: Math.max(1, Math.round((Date.parse(requested.expires_at) - Date.parse(requested.ts)) / 1000)),
      idleMs: (requested.idle_seconds ?? ttlSeconds) * 1000,
      leaseId: scheduled.lease_id,
      outputBytesPerExec: decided.budget?.output_bytes_per_step ?? null,
      egressDenialsRecorded: this.config.CAIRN_EGRESS_DENIALS_RECORDED,
      engine: this.engine,
      artifacts: this.artifacts,
      leases: this.leases,
      nc: this.nc,
      scanner,
      guard,
      secretValues,
      workerId: this.config.CAIRN_WORKER_ID,
      renewMs: this.config.CAIRN_LEASE_RENEW_MS,
      ttlMs: this.config.CAIRN_LEASE_TTL_MS,
      logger: this.logger,
      onEnded: (id) => this.sessions.delete(id),
    });
    live = session;
    // Live before its `sandbox.created` is stored: an op sent the moment the caller sees it finds the session.
    this.sessions.set(ctx.chainId, session);
    const created = await session.created(sandboxCreatedFields(handle, image, hardening, network === null ? 'none' : 'egress_proxy')).catch(async (error: unknown) => {
      this.sessions.delete(ctx.chainId);
      await this.engine.driver.destroy(sandbox).catch(() => undefined);
      throw error;
    });
    timings.mark('created');
    if (!created) {
      this.sessions.delete(ctx.chainId);
      await this.engine.driver.destroy(handle).catch(() => undefined);
      return;
    }
    const files = (requested.spec.files ?? []).map(inputFile);
    session.start(async () => {
      await this.engine.driver.putFiles(sandbox, files);
      await this.engine.putSecrets(sandbox, secretValues);
    });
    // The session holds its worker slot (heartbeats, reconcile) until it ends.
    void this.worker.track(ctx.chainId, caps, () => session.done);
    // Its room is no longer the warm pool's (the sandbox it claimed, if any, is out of the pool by now).
    this.engine.trimPool();
    this.logger.write('info', 'sandbox session started', { sandbox_id: ctx.chainId, container: handle.name, timings_ms: timings.laps });
  }

  /**
   * A session created on this worker that is not live here (the runtime restarted): its sandbox is
   * reaped and it ends on the record — `run.failed` E_WORKER_LOST, then `sandbox.destroyed`.
   */
  async settleLost(ctx: ReactionContext, view: SandboxView, placement: EvidenceReceiptOf<'run.scheduled'>, containerName: string): Promise<'failed' | 'untouched'> {
    if (this.sessions.has(view.id) || view.state !== 'READY' || view.workerId !== this.config.CAIRN_WORKER_ID) return 'untouched';
    let verifiedGone = false;
    try {
      await this.engine.driver.reapChain(this.config.CAIRN_WORKER_ID, view.id);
      verifiedGone = true;
    } catch (error) {
      this.logger.write('error', 'could not reap a lost sandbox session', { sandbox_id: view.id, error: describe(error) });
    }
    const placed = ctx.chainId === view.id ? ctx.causedBy(placement) : new ReactionContext(placement, this.service, this.log, () => undefined);
    const failed = await placed.appendAt(view.headSeq, 'run.failed', runFailedFields('E_WORKER_LOST', `worker ${this.config.CAIRN_WORKER_ID} restarted under the session`), 'lost');
    await placed.appendAt(failed.receipt.seq, 'sandbox.destroyed', sandboxDestroyedFields(containerName, verifiedGone, 'worker_lost'), 'lost-destroyed');
    await this.leases.delete(view.id, placement.lease_id).catch(() => false);
    this.logger.write('warn', 'a sandbox session lost in a restart was ended', { sandbox_id: view.id });
    return 'failed';
  }

  /** Recorded by the session (capped, guarded on its head); one refused before the session exists is only logged, its host redacted. */
  private recordDenial(sandboxId: string, denial: EgressDenial, guard: LeakGuard): void {
    const session = this.sessions.get(sandboxId);
    if (session !== undefined) session.recordDenial(denial);
    else this.logger.write('warn', 'egress refused before the session started', guard.logFilter({ sandbox_id: sandboxId, host: denial.host, port: denial.port, reason: denial.reason }));
  }
}

/** Milliseconds between the named steps of a sandbox's start, for the log (where the create time goes). */
class Stopwatch {
  readonly laps: Record<string, number> = {};
  private last = performance.now();

  mark(step: string): void {
    const now = performance.now();
    this.laps[step] = Math.round((now - this.last) * 10) / 10;
    this.last = now;
  }
}

/** This worker's durable consumer of its sandbox ops (`.` is not allowed in a consumer name). */
export function opsDurableName(workerId: string): string {
  return `cairn-runtime-sbxop-${workerId.replace(/\./g, '_')}`;
}

type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** A promise's outcome as a value, so independent steps can run at once and be judged in order. */
function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

function answerError(nc: NatsConnection, subject: string, code: ErrorCode, message: string): void {
  const hdrs = natsHeaders();
  hdrs.set(OP_MESSAGE_HEADER, 'end');
  nc.publish(subject, new TextEncoder().encode(JSON.stringify({ ok: false, error: { code, message, details: { state: 'DESTROYED' } } })), { headers: hdrs });
}

function safeJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    return null;
  }
}

function describe(error: unknown): string {
  if (error instanceof CairnError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
