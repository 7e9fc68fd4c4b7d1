import { CairnError, isCairnError } from '@cairn/contracts';
import type { CapacityResource, ErrorCode, EvidenceReceipt, EvidenceReceiptOf, GrantedCaps, QueueWait } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import { isHeadMoved } from '@cairn/evidence-log';
import { readSandboxChain, readValidRunChain } from '@cairn/lifecycle';
import type { ValidRunChain } from '@cairn/lifecycle';
import { LeaseStore, PlacementQueue, WorkerDrains, WorkerRegistry, withDrains } from '@cairn/operational';
import type { LeaseRecord, QueueEntry, RegisteredWorker } from '@cairn/operational';
import { grantLease, isExpired, liveWorkers, planQueue, reservationFor } from '@cairn/scheduling';
import type { QueuedRequest, QueuePlan } from '@cairn/scheduling';
import { EVIDENCE_LOG, JsonLogger, PeriodicTask, ReactionContext, SERVICE_CONFIG, SERVICE_LOGGER, SERVICE_NAME } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { fullMessage, hasImage, imageMissing, neverMessage, withLeasedReservations, withPlaced } from './placement.js';
import type { SchedulerConfig } from './scheduler.config.js';
import { SerialGate } from './serial-gate.js';

/** Placements in this process happen one at a time, so two runs never take the same last slot. */
export const PLACEMENT_GATE = Symbol('cairn.placement-gate');

/** A run or sandbox asking for a place, as the queue plans it. */
interface Want extends QueuedRequest {
  image: string;
  tenant: string;
  /** Epoch ms a sandbox create stops waiting; null: a run, which waits until it is placed. */
  deadlineAt: number | null;
  runnableSeq: number;
  /** The attempt its lease is for: 1, or the next after a `run.retried` (ADR 0035). */
  attempt: number;
}

/** What the first look at a newcomer decided. */
type Admission =
  | { kind: 'leased'; lease: LeaseRecord }
  | { kind: 'queue'; waitingFor: QueueWait }
  | { kind: 'fail'; code: ErrorCode; message: string; resource?: CapacityResource };

/** A failure on the record for work that cannot be placed, keyed so every path that decides it stores it once. */
const FAIL_KEYS: Partial<Record<ErrorCode, string>> = { E_IMAGE_PULL: 'image-missing', E_CAPACITY: 'capacity', E_RUNTIME_ABSENT: 'runtime-absent' };

/**
 * Places runs and sandbox sessions on workers (docs/sandboxes.md, "Capacity"; ADR 0015). A
 * newcomer — the receipt that made it runnable — is placed at once when it fits after everything
 * queued before it that fits; otherwise it waits in the placement queue (a KV bucket, not the
 * scheduler's consumer: the receipt is acknowledged, so nothing behind it is held up), or — a
 * sandbox create that did not ask to wait — fails at once on the record: `E_CAPACITY` naming what
 * ran out, `E_RUNTIME_ABSENT` when no runtime is live at all. The queue is planned again whenever
 * room may have freed (a run or sandbox ended here) and every `CAIRN_QUEUE_SCAN_INTERVAL_MS`.
 */
@Injectable()
export class Placements implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly task: PeriodicTask;
  private draining: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  constructor(
    private readonly workers: WorkerRegistry,
    private readonly drains: WorkerDrains,
    private readonly leases: LeaseStore,
    private readonly queue: PlacementQueue,
    @Inject(PLACEMENT_GATE) private readonly gate: SerialGate,
    @Inject(EVIDENCE_LOG) private readonly log: EvidenceLog,
    @Inject(SERVICE_NAME) private readonly service: string,
    @Inject(SERVICE_CONFIG) private readonly config: SchedulerConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {
    this.task = new PeriodicTask(config.CAIRN_QUEUE_SCAN_INTERVAL_MS, () => this.drain(), (error) => logger.write('error', 'queue pass failed; will try again', { error: String(error) }));
  }

  onApplicationBootstrap(): void {
    this.task.start();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    await this.task.stop();
    await this.draining;
  }

  /**
   * A run or sandbox became runnable (`ctx.receipt`, decided by `decided`, on the chain as read up
   * to `headSeq`): placed, queued, or failed on the record. `leased` hears of a lease written for it
   * before it is announced (the reaction gives it back should the chain end first).
   */
  async admit(
    ctx: ReactionContext,
    decided: EvidenceReceiptOf<'policy.decided'>,
    headSeq: number,
    waitSeconds: number | null,
    leased: (leaseId: string) => void,
    attempt = 1,
  ): Promise<void> {
    const runId = ctx.chainId;
    const { caps, image } = decided;
    if (caps === undefined || image === undefined) {
      throw new CairnError('E_UNKNOWN_STATE', `${runId}: policy.decided ${decided.decision} carries no caps or image`);
    }
    if ((await this.queue.get(runId)) !== null) {
      // Queued by an earlier delivery: the queue places it.
      this.kick();
      return;
    }
    const now = Date.now();
    const runnableSince = Date.parse(ctx.receipt.ts);
    const want = wantOf(runId, ctx.receipt.tenant, caps, image, runnableSince, ctx.receipt.seq, waitSeconds === null ? null : runnableSince + waitSeconds * 1000, attempt);
    const admission = await this.gate.run(() => this.decideNewcomer(want, runId.startsWith('sbx_') && waitSeconds === null, now));
    switch (admission.kind) {
      case 'leased': {
        const { lease } = admission;
        leased(lease.lease_id);
        await ctx.appendAt(headSeq, 'run.scheduled', { worker_id: lease.worker_id, lease_id: lease.lease_id, lease_expires_at: lease.expires_at, attempt: lease.attempt });
        this.logger.write('info', 'scheduled', { run_id: runId, worker_id: lease.worker_id, lease_id: lease.lease_id });
        return;
      }
      case 'fail':
        await ctx.appendAt(headSeq, 'run.failed', failedFields(admission), FAIL_KEYS[admission.code]);
        this.logger.write('warn', 'not placed', { run_id: runId, code: admission.code, resource: admission.resource ?? null, message: admission.message });
        return;
      case 'queue': {
        // A sandbox that did not ask to wait waits only out the grace a worker has to report a new image.
        const deadlineAt = want.deadlineAt ?? (runId.startsWith('sbx_') ? now + this.config.CAIRN_WORKER_STALE_AFTER_MS : null);
        await this.queue.enqueue(entryOf({ ...want, deadlineAt }, admission.waitingFor));
        this.logger.write('info', 'queued: no worker has room', { run_id: runId, waiting_for: admission.waitingFor, deadline_at: deadlineAt === null ? null : new Date(deadlineAt).toISOString() });
        return;
      }
    }
  }

  /** Plans the queue soon (room may have freed); passes asked for while one runs coalesce into one more. */
  kick(): void {
    if (this.stopped) return;
    if (this.draining !== null) {
      this.again = true;
      return;
    }
    this.draining = (async () => {
      do {
        this.again = false;
        await this.drain().catch((error: unknown) => this.logger.write('error', 'queue pass failed; will try again', { error: String(error) }));
      } while (this.again && !this.stopped);
    })().finally(() => (this.draining = null));
  }

  /** Takes a chain out of the queue (it ended or was placed elsewhere); true when it was queued. */
  async dequeue(chainId: string): Promise<boolean> {
    return this.queue.delete(chainId);
  }

  /**
   * One pass over the queue: places what fits now (in queue order, with backfill), fails what
   * waited past its deadline or can never fit, and records what each of the rest waits for.
   */
  async drain(now: number = Date.now()): Promise<void> {
    const decided = await this.gate.run(async () => {
      const entries = await this.queue.list();
      if (entries.length === 0) return null;
      const { workers, live } = await this.snapshot(now);
      const plan = this.plan(workers, live, entries.map(wantOfEntry), now);
      // What each worker holds once this pass has placed what it places, for the messages of what is refused.
      const held = withPlaced(withLeasedReservations(workers, live), plan.placed);
      const placed: { entry: QueueEntry; lease: LeaseRecord }[] = [];
      for (const { request, worker } of plan.placed) {
        const entry = entries.find((e) => e.chain_id === request.runId);
        if (entry === undefined) continue;
        const lease = await this.leaseOn(request, worker.workerId, now, live);
        if (lease !== null) placed.push({ entry, lease });
      }
      return { entries, plan, placed, workers, held };
    });
    if (decided === null) return;
    const { entries, plan, placed, workers, held } = decided;
    const byId = new Map(entries.map((e) => [e.chain_id, e]));
    for (const { entry, lease } of placed) await this.settle(entry, () => this.announce(entry, lease));
    for (const { request, resource } of plan.never) {
      const entry = byId.get(request.runId);
      if (entry !== undefined) await this.settle(entry, () => this.fail(entry, { kind: 'fail', code: 'E_CAPACITY', resource, message: neverMessage(request.runId, request, resource, held, now, this.config.CAIRN_WORKER_STALE_AFTER_MS) }));
    }
    for (const { request, waitingFor } of plan.waiting) {
      const entry = byId.get(request.runId);
      if (entry === undefined) continue;
      const wait = this.waitOf(waitingFor, workers, now);
      const missing = imageMissing(workers, entry.image, entry.enqueued_at, now, this.config.CAIRN_WORKER_STALE_AFTER_MS);
      if (missing !== null) {
        await this.settle(entry, () => this.fail(entry, { kind: 'fail', code: 'E_IMAGE_PULL', message: imageMessage(entry.image, missing) }));
      } else if (entry.deadline_at !== null && now >= entry.deadline_at) {
        await this.settle(entry, () => this.fail(entry, expiredFailure(entry, wait, held, now, this.config.CAIRN_WORKER_STALE_AFTER_MS)));
      } else if (wait !== entry.waiting_for) {
        await this.settle(entry, () => this.queue.waitingFor(entry.chain_id, wait));
      }
    }
  }

  private async settle(entry: QueueEntry, action: () => Promise<unknown>): Promise<void> {
    try {
      await action();
    } catch (error) {
      this.logger.write('error', 'could not settle a queued run; will try again', { run_id: entry.chain_id, error: isCairnError(error) ? `${error.code}: ${error.message}` : String(error) });
    }
  }

  /** A newcomer, inside the gate: placed when it fits behind what is queued, else queued or failed. */
  private async decideNewcomer(want: Want, failIfFull: boolean, now: number): Promise<Admission> {
    const holding = await this.heldLease(want.runId, now, want.attempt);
    if (holding !== null) return { kind: 'leased', lease: holding };
    const [{ workers, live }, entries] = await Promise.all([this.snapshot(now), this.queue.list()]);
    const plan = this.plan(workers, live, [...entries.filter((e) => e.chain_id !== want.runId).map(wantOfEntry), want], now);
    // What is left once the work queued before it has its room: what the refusal's figures are of.
    const held = withPlaced(
      withLeasedReservations(workers, live),
      plan.placed.filter((p) => p.request.runId !== want.runId),
    );
    if (plan.placed.some((p) => p.request.runId !== want.runId)) this.kick();
    const mine = plan.placed.find((p) => p.request.runId === want.runId);
    if (mine !== undefined) {
      const lease = await this.leaseOn(want, mine.worker.workerId, now, live);
      if (lease !== null) return { kind: 'leased', lease };
      return { kind: 'queue', waitingFor: 'slots' };
    }
    const never = plan.never.find((n) => n.request.runId === want.runId);
    if (never !== undefined) return { kind: 'fail', code: 'E_CAPACITY', resource: never.resource, message: neverMessage(want.runId, want, never.resource, held, now, this.config.CAIRN_WORKER_STALE_AFTER_MS) };
    const missing = imageMissing(workers, want.image, want.enqueuedAt, now, this.config.CAIRN_WORKER_STALE_AFTER_MS);
    if (missing !== null) return { kind: 'fail', code: 'E_IMAGE_PULL', message: imageMessage(want.image, missing) };
    const waitingFor = this.waitOf(plan.waiting.find((w) => w.request.runId === want.runId)?.waitingFor ?? 'slots', workers, now);
    if (failIfFull && waitingFor !== 'image') return expiredFailure(entryOf(want, waitingFor), waitingFor, held, now, this.config.CAIRN_WORKER_STALE_AFTER_MS);
    return { kind: 'queue', waitingFor };
  }

  private plan(workers: readonly RegisteredWorker[], live: readonly LeaseRecord[], wants: Want[], now: number): QueuePlan<Want> {
    const candidates = withLeasedReservations(workers, live);
    return planQueue(candidates, wants, now, {
      staleAfterMs: this.config.CAIRN_WORKER_STALE_AFTER_MS,
      candidates: (request, current) => current.filter((worker) => hasImage(worker as RegisteredWorker, request.image)),
    });
  }

  /** `runtime` when no live worker has the image but some live worker exists: then it waits for the image. */
  private waitOf(waitingFor: QueueWait, workers: readonly RegisteredWorker[], now: number): QueueWait {
    if (waitingFor !== 'runtime') return waitingFor;
    return liveWorkers(workers, now, this.config.CAIRN_WORKER_STALE_AFTER_MS).length > 0 ? 'image' : 'runtime';
  }

  private async snapshot(now: number): Promise<{ workers: RegisteredWorker[]; live: LeaseRecord[] }> {
    // An operator's drain (ADR 0026) takes the worker out of placement as its own drain would.
    const [workers, drains, leases] = await Promise.all([this.workers.list(), this.drains.list(), this.leases.list()]);
    return { workers: withDrains(workers, drains), live: leases.filter((lease) => !isExpired(lease, now)) };
  }

  /**
   * The live lease of this attempt a chain holds already (a redelivery). An expired one nobody
   * announced is removed, and so is one of an earlier attempt (ADR 0035): that attempt was retried,
   * so its worker may write nothing more (the lease fence, ADR 0019).
   */
  private async heldLease(runId: string, now: number, attempt: number): Promise<LeaseRecord | null> {
    if (!(await this.leases.list()).some((lease) => lease.run_id === runId)) return null;
    const held = await this.leases.get(runId);
    if (held !== null && !isExpired(held, now) && held.attempt >= attempt) return held;
    if (held !== null) await this.leases.delete(runId, held.lease_id);
    return null;
  }

  /** A lease on `workerId` for the wanted attempt, or the one the chain holds for it. */
  private async leaseOn(want: Want, workerId: string, now: number, live: readonly LeaseRecord[]): Promise<LeaseRecord | null> {
    const holding = live.find((lease) => lease.run_id === want.runId);
    if (holding !== undefined) {
      // This attempt's (a redelivery) is kept; an earlier attempt's is removed, and a new one written.
      const held = await this.heldLease(want.runId, now, want.attempt);
      if (held !== null || holding.attempt >= want.attempt) return held;
    }
    const granted = grantLease(want.runId, workerId, now, this.config.CAIRN_LEASE_TTL_MS, want.attempt);
    const reservation = { runId: want.runId, memoryMiB: want.memoryMiB, cpus: want.cpus, diskMiB: want.diskMiB, ...(want.pids === undefined ? {} : { pids: want.pids }) };
    const { lease, created } = await this.leases.create({ ...granted, reservation });
    if (!created && isExpired(lease, now)) {
      // Leased by someone else and left to expire: replaced on the next pass.
      await this.leases.delete(want.runId, lease.lease_id);
      return null;
    }
    return lease;
  }

  /** Announces a queued chain's lease (`run.scheduled`, caused by what made it runnable) if it still waits; else gives the lease back. */
  private async announce(entry: QueueEntry, lease: LeaseRecord): Promise<void> {
    const waiting = await this.stillWaiting(entry);
    if (waiting === null) {
      await this.dropped(entry, lease.lease_id);
      return;
    }
    try {
      await waiting.ctx.appendAt(waiting.headSeq, 'run.scheduled', { worker_id: lease.worker_id, lease_id: lease.lease_id, lease_expires_at: lease.expires_at, attempt: lease.attempt });
    } catch (error) {
      // The chain moved (a cancel, say): the next pass decides again, with the lease it holds.
      if (isHeadMoved(error)) return;
      throw error;
    }
    await this.queue.delete(entry.chain_id);
    this.logger.write('info', 'scheduled from the queue', { run_id: entry.chain_id, worker_id: lease.worker_id, lease_id: lease.lease_id, waited_ms: Date.now() - entry.enqueued_at });
  }

  private async fail(entry: QueueEntry, failure: Extract<Admission, { kind: 'fail' }>): Promise<void> {
    const waiting = await this.stillWaiting(entry);
    if (waiting !== null) {
      try {
        await waiting.ctx.appendAt(waiting.headSeq, 'run.failed', failedFields(failure), FAIL_KEYS[failure.code]);
      } catch (error) {
        if (isHeadMoved(error)) return;
        throw error;
      }
      this.logger.write('warn', 'not placed', { run_id: entry.chain_id, code: failure.code, resource: failure.resource ?? null, message: failure.message });
    }
    const held = await this.leases.get(entry.chain_id);
    await this.dropped(entry, held?.lease_id ?? null);
  }

  /** Out of the queue, and an unannounced lease of it given back (one `run.scheduled` names is the runtime's to release). */
  private async dropped(entry: QueueEntry, leaseId: string | null): Promise<void> {
    await this.queue.delete(entry.chain_id);
    if (leaseId === null) return;
    const announced = (await this.chain(entry.chain_id)).some((r) => (r as { type?: unknown; lease_id?: unknown }).type === 'run.scheduled' && (r as { lease_id?: unknown }).lease_id === leaseId);
    if (!announced && (await this.leases.delete(entry.chain_id, leaseId))) this.logger.write('info', 'unannounced lease released: the chain no longer waits', { run_id: entry.chain_id });
  }

  /** The queued chain as it is now, if it still waits to be placed: a context caused by what made it runnable, and its head. */
  private async stillWaiting(entry: QueueEntry): Promise<{ ctx: ReactionContext; headSeq: number } | null> {
    const raw = await this.chain(entry.chain_id);
    const headSeq = (raw.at(-1) as { seq?: number } | undefined)?.seq ?? 0;
    let receipts: EvidenceReceipt[];
    if (entry.chain_id.startsWith('sbx_')) {
      const chain = readSandboxChain(raw);
      if (chain === null || chain.invalidSeqs.length > 0 || chain.view === null) return null;
      if (chain.view.state !== 'PENDING' || chain.view.sealed || chain.receipts.some((r) => r.type === 'run.scheduled')) return null;
      receipts = chain.receipts;
    } else {
      const chain = readValidRunChain(raw);
      const runnable = chain?.receipts.find((r) => r.seq === entry.runnable_seq);
      if (chain === null || runnable === undefined || runnableDecision(runnable, chain) === null) return null;
      receipts = chain.receipts;
    }
    const runnable = receipts.find((r) => r.seq === entry.runnable_seq);
    if (runnable === undefined) return null;
    return { ctx: new ReactionContext(runnable, this.service, this.log, () => undefined), headSeq };
  }

  private async chain(chainId: string): Promise<unknown[]> {
    const raw: unknown[] = [];
    for await (const stored of this.log.readChain(chainId)) raw.push(stored.receipt);
    return raw;
  }
}

/**
 * The allowing decision to place the run by, or null when this receipt does not call for a
 * placement: the run is placed already, has ended, or (on a grant) still waits for another approval.
 * A `run.retried` (ADR 0035) calls for the next attempt's placement, by the same decision, while it
 * is the chain's last and the run waits in SUBMITTED with that attempt not placed yet.
 */
export function runnableDecision(receipt: EvidenceReceipt, chain: ValidRunChain): EvidenceReceiptOf<'policy.decided'> | null {
  const { receipts, view } = chain;
  if (view === null || view.sealed) return null;
  const decided = receipts.find((r): r is EvidenceReceiptOf<'policy.decided'> => r.type === 'policy.decided');
  if (decided === undefined || decided.decision === 'deny') return null;
  if (receipt.type === 'run.retried') {
    const last = receipts.findLast((r) => r.type === 'run.retried');
    return last?.seq === receipt.seq && view.state === 'SUBMITTED' && !view.placed ? decided : null;
  }
  if (receipts.some((r) => r.type === 'run.scheduled')) return null;
  if (receipt.type === 'policy.decided') {
    return receipt.decision === 'allow' && view.state === 'SUBMITTED' ? decided : null;
  }
  if (receipt.type !== 'approval.granted' || decided.decision !== 'hold' || view.state !== 'AWAITING_APPROVAL') return null;
  const granted = new Set(receipts.flatMap((r) => (r.type === 'approval.granted' ? [r.approval_id] : [])));
  const pending = receipts.filter((r) => r.type === 'approval.requested' && r.scope === 'run' && !granted.has(r.approval_id));
  return pending.length === 0 ? decided : null;
}

function wantOf(runId: string, tenant: string, caps: GrantedCaps, image: string, enqueuedAt: number, runnableSeq: number, deadlineAt: number | null, attempt: number): Want {
  return { ...reservationFor(runId, caps), image, tenant, enqueuedAt, runnableSeq, deadlineAt, attempt };
}

/**
 * The attempt a placement on this chain is (its lease `<run>:<attempt>`): 1, or the one after the
 * attempt the last `run.retried` gave back (ADR 0035), so a lease id is never used twice.
 */
export function placementAttempt(receipts: readonly EvidenceReceipt[]): number {
  const retried = receipts.findLast((r): r is EvidenceReceiptOf<'run.retried'> => r.type === 'run.retried');
  return retried === undefined ? 1 : retried.attempt + 1;
}

function wantOfEntry(entry: QueueEntry): Want {
  return {
    ...entry.reservation,
    isolation: 'docker',
    image: entry.image,
    tenant: entry.tenant,
    enqueuedAt: entry.enqueued_at,
    runnableSeq: entry.runnable_seq,
    deadlineAt: entry.deadline_at,
    attempt: entry.attempt ?? 1,
  };
}

function entryOf(want: Want, waitingFor: QueueWait): QueueEntry {
  const { runId, memoryMiB, cpus, diskMiB, pids } = want;
  return {
    chain_id: runId,
    tenant: want.tenant,
    enqueued_at: want.enqueuedAt,
    deadline_at: want.deadlineAt,
    runnable_seq: want.runnableSeq,
    image: want.image,
    reservation: { runId, memoryMiB, cpus, diskMiB, ...(pids === undefined ? {} : { pids }) },
    waiting_for: waitingFor,
    // Absent for a first attempt, as every entry written before retries existed.
    ...(want.attempt === 1 ? {} : { attempt: want.attempt }),
  };
}

function failedFields(failure: Extract<Admission, { kind: 'fail' }>): Record<string, unknown> {
  return { error_code: failure.code, message: failure.message.slice(0, 2000), ...(failure.resource === undefined ? {} : { resource: failure.resource }) };
}

/** What a wait that ran out (or a create that would not wait) ends with: no runtime at all, or what ran out. */
function expiredFailure(entry: QueueEntry, wait: QueueWait, workers: readonly RegisteredWorker[], now: number, staleAfterMs: number): Extract<Admission, { kind: 'fail' }> {
  if (wait === 'runtime') return { kind: 'fail', code: 'E_RUNTIME_ABSENT', message: `no runtime worker is live to place ${entry.chain_id} on` };
  if (wait === 'image') return { kind: 'fail', code: 'E_IMAGE_PULL', message: imageMessage(entry.image, workers.length) };
  return { kind: 'fail', code: 'E_CAPACITY', resource: wait, message: fullMessage(entry.chain_id, entry.reservation, wait, workers, now, staleAfterMs) };
}

function imageMessage(image: string, live: number): string {
  return `no live worker has image ${image} (${live} live worker(s) report their images); build it on a worker — \`cairn images build\` — and submit again`;
}
