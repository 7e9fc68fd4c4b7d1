import { CairnError, isCairnError } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import type { LeaseStore, RegisteredWorker, WorkerRegistry } from '@cairn/operational';
import { freeCapacity, reservationFor } from '@cairn/scheduling';
import type { Reservation, WorkerCapacity } from '@cairn/scheduling';
import type { SandboxCaps } from '@cairn/sandbox';
import { EVIDENCE_LOG, ReactionContext, SERVICE_CONFIG, SERVICE_LOGGER, SERVICE_NAME } from '@cairn/service-kit';
import type { JsonLogger } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { BeforeApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { settleLostRun } from './lost-run.js';
import { assessScheduled, lastPlacementOn, parseChain } from './run-assessment.js';
import { workerSlots } from './runtime.config.js';
import type { RuntimeConfig } from './runtime.config.js';
import { LEASE_STORE, SANDBOX_ENGINE, WORKER_REGISTRY } from './runtime.tokens.js';
import type { SandboxEngine } from './sandbox-engine.adapter.js';

/** What reconcile found and did at start, for logs and tests. */
export interface ReconcileReport {
  /** Containers of this worker reaped (verified gone). */
  reaped: string[];
  /** Runs lost here: failed E_WORKER_LOST, or given back to the queue (`run.retried`) when their RunSpec opted into retries. */
  lost: string[];
  /** Runs lost with a cancel pending: answered with `run.cancelled`. */
  cancelled: string[];
}

/**
 * The worker's side of operational state (docs/adr/0003): registration and heartbeats in the
 * worker registry, reconcile at start (before the reactor takes any work), the set of runs in
 * flight here, and a drain on shutdown that lets them finish.
 */
@Injectable()
export class RuntimeWorker implements OnModuleInit, BeforeApplicationShutdown {
  private readonly active = new Map<string, { reservation: Reservation; done: Promise<void> }>();
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private beating: Promise<void> = Promise.resolve();
  private healthy = false;
  private stopping = false;
  private lastReconcile: ReconcileReport = { reaped: [], lost: [], cancelled: [] };

  constructor(
    @Inject(SERVICE_CONFIG) private readonly config: RuntimeConfig,
    @Inject(SERVICE_NAME) private readonly service: string,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
    @Inject(EVIDENCE_LOG) private readonly log: EvidenceLog,
    @Inject(SANDBOX_ENGINE) private readonly engine: SandboxEngine,
    @Inject(LEASE_STORE) private readonly leases: LeaseStore,
    @Inject(WORKER_REGISTRY) private readonly registry: WorkerRegistry,
  ) {}

  get workerId(): string {
    return this.config.CAIRN_WORKER_ID;
  }

  /** Shutting down: new placements wait (they are redelivered later), runs in flight finish. */
  get draining(): boolean {
    return this.stopping;
  }

  get reconcileReport(): ReconcileReport {
    return this.lastReconcile;
  }

  /** What this worker registers: fixed from its start (I-6/I-9). */
  get capacity(): WorkerCapacity {
    const { config } = this;
    return {
      slots: workerSlots(config),
      memoryMiB: config.CAIRN_WORKER_MEMORY_MIB,
      cpus: config.CAIRN_WORKER_CPUS,
      diskMiB: config.CAIRN_WORKER_DISK_MIB,
      pids: config.CAIRN_WORKER_PIDS,
      cpuOversubscription: config.CAIRN_WORKER_CPU_OVERSUBSCRIPTION,
      runCpuOversubscription: config.CAIRN_WORKER_RUN_CPU_OVERSUBSCRIPTION,
    };
  }

  /**
   * Whether idle warm sandboxes of these caps fit beside the runs and sessions held here: the pool
   * only ever uses room placement has not (each counts as a session would, slot included).
   */
  poolFits(held: readonly SandboxCaps[]): boolean {
    const pooled = held.map((caps, i) => {
      const { isolation: _isolation, ...reservation } = reservationFor(`sbx_warm-${i}`, { memory_mib: caps.memoryMiB, disk_mib: caps.diskMiB, cpus: caps.cpus, pids: caps.pids });
      return reservation;
    });
    const free = freeCapacity({
      workerId: this.workerId,
      capacity: this.capacity,
      isolation: ['docker'],
      draining: false,
      healthy: true,
      lastHeartbeatAt: 0,
      inFlight: [...[...this.active.values()].map((run) => run.reservation), ...pooled],
    });
    return free.slots >= 0 && free.memoryMiB >= 0 && free.diskMiB >= 0 && free.pids >= 0 && free.milliCpus >= 0;
  }

  async onModuleInit(): Promise<void> {
    this.engine.setPoolRoom((held) => this.poolFits(held));
    this.healthy = await this.engineAnswers(true);
    if (this.healthy) await this.checkUserns();
    await this.registry.register(await this.record());
    this.lastReconcile = await this.reconcile();
    this.heartbeatTimer = setInterval(() => {
      this.beating = this.beating.then(() => this.heartbeat());
    }, this.config.CAIRN_HEARTBEAT_MS);
    this.logger.write('info', 'worker registered', {
      worker_id: this.workerId,
      healthy: this.healthy,
      capacity: this.capacity,
      reaped: this.lastReconcile.reaped.length,
      lost: this.lastReconcile.lost.length,
    });
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    await this.heartbeat();
    await Promise.allSettled([...this.active.values()].map((run) => run.done));
    await this.engine.closePool().catch((error: unknown) => {
      this.logger.write('warn', 'could not empty the warm pool', { worker_id: this.workerId, error: String(error) });
    });
    if (this.heartbeatTimer !== null) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = null;
    await this.beating;
    await this.registry.deregister(this.workerId).catch((error: unknown) => {
      this.logger.write('warn', 'could not deregister', { worker_id: this.workerId, error: String(error) });
    });
  }

  /** Runs `work` as an in-flight run of this worker (reported in heartbeats, kept by reconcile). */
  async track(runId: string, caps: { memory_mib: number; disk_mib: number; cpus: number; pids?: number }, work: () => Promise<void>): Promise<void> {
    const { isolation: _isolation, ...reservation } = reservationFor(runId, caps);
    let finished = (): void => undefined;
    const done = new Promise<void>((resolve) => (finished = resolve));
    // The room this takes is no longer the warm pool's: the caller trims the pool once its sandbox
    // exists (`SandboxEngine.trimPool`), so a warm sandbox it claimed is not counted twice.
    this.active.set(runId, { reservation, done });
    try {
      await work();
    } finally {
      this.active.delete(runId);
      finished();
      // Its room is free again: the pool may fill up to its size within it.
      this.engine.refillPool();
    }
  }

  isActive(runId: string): boolean {
    return this.active.has(runId);
  }

  /**
   * Reaps this worker's containers that no run in flight here holds, and fails E_WORKER_LOST the
   * runs this worker held whose sandbox was created but which never finished — or, when a cancel
   * was asked of one, answers it with `run.cancelled` (`settleLostRun`): found from the reaped
   * containers' chain labels and from the leases this worker holds.
   */
  async reconcile(): Promise<ReconcileReport> {
    const chains = new Set<string>();
    let reaped: string[] = [];
    let verifiedGone = false;
    try {
      reaped = await this.engine.driver.reconcile(this.workerId, (chainId) => {
        chains.add(chainId);
        return this.active.has(chainId);
      });
      verifiedGone = true;
    } catch (error) {
      this.logger.write('error', 'could not reap sandboxes at start', { worker_id: this.workerId, error: String(error) });
    }
    for (const lease of await this.leases.list()) if (lease.worker_id === this.workerId) chains.add(lease.run_id);

    const lost: string[] = [];
    const cancelled: string[] = [];
    for (const chainId of chains) {
      if (!chainId.startsWith('run_') || this.active.has(chainId)) continue;
      const stored: unknown[] = [];
      for await (const receipt of this.log.readChain(chainId)) stored.push(receipt.receipt);
      const parsed = parseChain(stored);
      if (!parsed.ok) {
        this.logger.write('error', 'not reconciling a chain that breaks its contract', { run_id: chainId, seq: parsed.seq, reason: parsed.message });
        continue;
      }
      const placement = lastPlacementOn(parsed.receipts, this.workerId);
      if (placement === null) continue;
      const assessment = assessScheduled(parsed.receipts, placement, this.workerId);
      if (assessment.kind !== 'lost') continue;
      const ctx = new ReactionContext(placement, this.service, this.log, () => undefined);
      const settled = await settleLostRun(ctx, { workerId: this.workerId, leaseId: placement.lease_id, verifiedGone, leases: this.leases });
      if (settled === 'failed' || settled === 'retried') lost.push(chainId);
      if (settled === 'cancelled') cancelled.push(chainId);
    }
    if (reaped.length > 0 || lost.length > 0 || cancelled.length > 0) this.logger.write('warn', 'reconciled at start', { worker_id: this.workerId, reaped, lost, cancelled });
    return { reaped, lost, cancelled };
  }

  /** A heartbeat now (after an image build: the registry then shows the new image without waiting a beat). */
  async heartbeatNow(): Promise<void> {
    this.beating = this.beating.then(() => this.heartbeat());
    await this.beating;
  }

  private async heartbeat(): Promise<void> {
    try {
      this.healthy = await this.engineAnswers(false);
      await this.registry.heartbeat(await this.record());
    } catch (error) {
      this.logger.write('warn', 'heartbeat failed', { worker_id: this.workerId, error: isCairnError(error) ? `${error.code}: ${error.message}` : String(error) });
    }
  }

  private async record(): Promise<RegisteredWorker> {
    let images: Record<string, string> = {};
    if (this.healthy) {
      images = await this.engine.localImages().catch((error: unknown) => {
        this.logger.write('warn', 'could not list local images', { error: String(error) });
        return {};
      });
    }
    return {
      workerId: this.workerId,
      capacity: this.capacity,
      isolation: ['docker'],
      draining: this.stopping,
      healthy: this.healthy,
      lastHeartbeatAt: Date.now(),
      inFlight: [...this.active.values()].map((run) => run.reservation),
      images,
      pool: this.engine.poolStats,
    };
  }

  /**
   * A worker that must run its sandboxes user-namespace-remapped (CAIRN_SANDBOX_REQUIRE_USERNS) does
   * not start on an engine that does not remap: E_RUNTIME_ABSENT. (Each sandbox's hardening check
   * refuses one again, should the engine be restarted without it later.)
   */
  private async checkUserns(): Promise<void> {
    if (!this.config.CAIRN_SANDBOX_REQUIRE_USERNS) return;
    const userns = await this.engine.userns();
    if (!userns.remapped) {
      throw new CairnError(
        'E_RUNTIME_ABSENT',
        `worker ${this.workerId} must run sandboxes user-namespace-remapped (CAIRN_SANDBOX_REQUIRE_USERNS), and the engine on ${this.config.CAIRN_DOCKER_SOCKET} does not remap (dockerd --userns-remap)`,
        { worker_id: this.workerId },
      );
    }
  }

  /** Whether the engine answers; a missing one is logged at fatal level once at start (runs fail E_RUNTIME_ABSENT). */
  private async engineAnswers(atStart: boolean): Promise<boolean> {
    try {
      await this.engine.driver.ping();
      return true;
    } catch (error) {
      if (atStart || this.healthy) {
        this.logger.write('fatal', 'no container engine answers: every run placed here fails E_RUNTIME_ABSENT', {
          worker_id: this.workerId,
          socket: this.config.CAIRN_DOCKER_SOCKET,
          error: isCairnError(error) ? error.message : String(error),
        });
      }
      return false;
    }
  }
}
