import { NatsArtifactStore } from '@cairn/artifact-store';
import { loadConfig } from '@cairn/config';
import { parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt, EvidenceReceiptOf, GrantedCaps, RunSpec } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import { bucketStreamName, LeaseStore, WorkerRegistry } from '@cairn/operational';
import type { LeaseRecord } from '@cairn/operational';
import { BUSYBOX_IMAGE_TAG, createDockerClient, defaultAgentSocketRoot, ensureBusyboxImage } from '@cairn/sandbox-docker';
import { leaseId, reservationFor } from '@cairn/scheduling';
import { startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostFacts, runtimeConfigSchema, withGivenWorkerId } from '../src/runtime.config.js';
import type { RuntimeConfig } from '../src/runtime.config.js';
import { RUNTIME_SERVICE, runtimeModule } from '../src/runtime.module.js';

export const DEFAULT_CAPS: GrantedCaps = { wall_seconds: 30, memory_mib: 32, pids: 32, disk_mib: 8, cpus: 0.5 };

export interface SubmitOptions {
  workerId: string;
  caps?: GrantedCaps;
  /** As policy grants it: `name[@sha256:…]`; default the busybox image pinned to its id. */
  image?: string;
  /** Put the lease in the lease store (default true). */
  lease?: boolean;
  /** Egress as policy grants it (`policy.decided.network`). */
  network?: { egress: string[]; allow_private: boolean };
  /** The run's id (default: a fresh one). */
  runId?: string;
  leaseTtlMs?: number;
}

export interface SubmittedRun {
  runId: string;
  scheduled: EvidenceReceiptOf<'run.scheduled'>;
  lease: LeaseRecord;
}

/**
 * One test file's world on the real NATS and Docker engine: its own evidence stream and subject
 * prefix, its own worker and lease buckets and artifact object store, its own directory (worker
 * state) and worker ids (every container a test makes carries one), all removed by `dispose()`.
 */
export class RuntimeWorld {
  readonly workerIds = new Set<string>();
  readonly docker = createDockerClient();
  private readonly running: RunningService[] = [];

  private constructor(
    readonly nc: NatsConnection,
    readonly log: EvidenceLog,
    readonly leases: LeaseStore,
    readonly registry: WorkerRegistry,
    readonly artifactDir: string,
    /** The runtime's object store, opened to read (the runtime creates it). */
    readonly artifacts: NatsArtifactStore,
    readonly busyboxId: string,
    readonly names: { stream: string; prefix: string; workers: string; leases: string; artifacts: string },
  ) {}

  static async create(prefix: string): Promise<RuntimeWorld> {
    const busyboxId = await ensureBusyboxImage();
    const nc = await connect({ servers: testNatsUrl() });
    const names = {
      stream: uniqueName(`${prefix}_EV`).toUpperCase(),
      prefix: uniqueName(`${prefix}.ev`).toLowerCase(),
      workers: uniqueName(`${prefix}_workers`),
      leases: uniqueName(`${prefix}_leases`),
      artifacts: uniqueName(`${prefix}_artifacts`),
    };
    const log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream: names.stream, subjectPrefix: names.prefix });
    const leases = await LeaseStore.open(nc, { bucket: names.leases });
    const registry = await WorkerRegistry.open(nc, { bucket: names.workers });
    const artifactDir = await mkdtemp(join(tmpdir(), `cairn-${prefix}-`));
    const artifacts = await NatsArtifactStore.open(nc, { bucket: names.artifacts });
    return new RuntimeWorld(nc, log, leases, registry, artifactDir, artifacts, busyboxId, names);
  }

  /** A worker's state directory in this world (removed with it). */
  stateDir(workerId: string): string {
    return join(this.artifactDir, 'workers', workerId);
  }

  newWorkerId(label: string): string {
    const id = uniqueName(`rt-${label}`).toLowerCase();
    this.workerIds.add(id);
    return id;
  }

  /** The runtime's environment: what `main.js` reads, and what an in-process runtime is configured from. */
  env(workerId: string, overrides: Record<string, string> = {}): Record<string, string> {
    this.workerIds.add(workerId);
    return {
      CAIRN_NATS_URL: testNatsUrl(),
      CAIRN_EVIDENCE_STREAM: this.names.stream,
      CAIRN_EVIDENCE_SUBJECT_PREFIX: this.names.prefix,
      CAIRN_WORKERS_BUCKET: this.names.workers,
      CAIRN_LEASES_BUCKET: this.names.leases,
      CAIRN_WORKER_ID: workerId,
      CAIRN_WORKER_SLOTS: '2',
      CAIRN_ARTIFACT_BUCKET: this.names.artifacts,
      // Small: every test's store reserves its max_bytes on the shared server.
      CAIRN_ARTIFACT_STORE_MAX_BYTES: String(256 * 1024 * 1024),
      // No older stack's directory to import: an empty one of this world's.
      CAIRN_ARTIFACT_DIR: join(this.artifactDir, 'artifacts'),
      // The worker's id and lock (main.ts), under this world's directory rather than the checkout's `.cairn`.
      CAIRN_WORKER_STATE_DIR: this.stateDir(workerId),
      CAIRN_HEARTBEAT_MS: '300',
      CAIRN_LEASE_RENEW_MS: '300',
      CAIRN_LEASE_TTL_MS: '5000',
      CAIRN_STEP_OUTPUT_MAX_BYTES: '65536',
      // Off unless a test turns it on (runtime-warm-pool.int.spec.ts): the other tests count containers.
      CAIRN_WARM_POOL_SIZE: '0',
      ...overrides,
    };
  }

  config(workerId: string, overrides: Record<string, string> = {}): RuntimeConfig {
    return withGivenWorkerId(loadConfig(runtimeConfigSchema(hostFacts()), this.env(workerId, overrides)));
  }

  async startRuntime(workerId: string, overrides: Record<string, string> = {}): Promise<RunningService> {
    const service = await startService(RUNTIME_SERVICE, runtimeModule(this.config(workerId, overrides)));
    this.running.push(service);
    return service;
  }

  /** Appends what intake and policy would: a submitted and allowed run, not placed yet (a real scheduler may place it). */
  async submitAllowed(spec: RunSpec, options: Omit<SubmitOptions, 'workerId' | 'lease' | 'leaseTtlMs'> = {}): Promise<{ runId: string; policySeq: number }> {
    const runId = options.runId ?? `run_${uniqueName('rt').toLowerCase()}`;
    await this.log.append(runId, {
      type: 'run.submitted',
      actor: 'intake',
      tenant: 'acme',
      causation: null,
      fields: { spec, spec_sha256: sha256Hex(canonicalJson(spec)), submitted_by: 'key:test', idempotency_key_sha256: sha256Hex(runId) },
    });
    const policy = await this.log.append(runId, {
      type: 'policy.decided',
      actor: 'policy',
      tenant: 'acme',
      causation: `${runId}:1`,
      fields: {
        decision: 'allow',
        policy_version: 'e'.repeat(64),
        reasons: [],
        caps: options.caps ?? DEFAULT_CAPS,
        image: options.image ?? `${BUSYBOX_IMAGE_TAG}@${this.busyboxId}`,
        ...(options.network === undefined ? {} : { network: options.network }),
      },
    });
    return { runId, policySeq: policy.receipt.seq };
  }

  /** Appends what intake, policy and the scheduler would: a submitted, allowed and placed run. */
  async submitRun(spec: RunSpec, options: SubmitOptions): Promise<SubmittedRun> {
    const caps = options.caps ?? DEFAULT_CAPS;
    const { runId, policySeq } = await this.submitAllowed(spec, options);
    const now = Date.now();
    const { isolation: _isolation, ...reservation } = reservationFor(runId, caps);
    const lease: LeaseRecord = {
      lease_id: leaseId(runId, 1),
      run_id: runId,
      worker_id: options.workerId,
      attempt: 1,
      granted_at: new Date(now).toISOString(),
      expires_at: new Date(now + (options.leaseTtlMs ?? 10_000)).toISOString(),
      reservation,
    };
    if (options.lease !== false) await this.leases.put(lease);
    const appended = await this.log.append(runId, {
      type: 'run.scheduled',
      actor: 'scheduler',
      tenant: 'acme',
      causation: `${runId}:${policySeq}`,
      fields: { worker_id: options.workerId, lease_id: lease.lease_id, lease_expires_at: lease.expires_at, attempt: 1 },
    });
    const parsed = parseEvidenceReceipt(appended.receipt);
    if (!parsed.ok || parsed.receipt.type !== 'run.scheduled') throw new Error('run.scheduled did not parse');
    return { runId, scheduled: parsed.receipt, lease };
  }

  async receipts(runId: string): Promise<EvidenceReceipt[]> {
    const out: EvidenceReceipt[] = [];
    for await (const stored of this.log.readChain(runId)) {
      const parsed = parseEvidenceReceipt(stored.receipt);
      if (!parsed.ok) throw new Error(parsed.message);
      out.push(parsed.receipt);
    }
    return out;
  }

  async types(runId: string): Promise<string[]> {
    return (await this.receipts(runId)).map((r) => r.type);
  }

  /** Waits until the chain holds a receipt of one of `types`; returns the chain. */
  async waitForType(runId: string, types: readonly string[], ms = 30_000): Promise<EvidenceReceipt[]> {
    return this.waitFor(runId, (chain) => chain.some((r) => types.includes(r.type)), ms);
  }

  async waitFor(runId: string, check: (chain: EvidenceReceipt[]) => boolean, ms = 30_000): Promise<EvidenceReceipt[]> {
    const end = Date.now() + ms;
    for (;;) {
      const chain = await this.receipts(runId);
      if (check(chain)) return chain;
      if (Date.now() > end) throw new Error(`${runId}: condition not met in ${ms} ms; chain: ${chain.map((r) => r.type).join(', ')}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** The containers labelled with a worker id (all states). */
  async containersOf(workerId: string): Promise<{ id: string; name: string; chain: string | undefined; pool: string | undefined; running: boolean }[]> {
    const listed = await this.docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${workerId}`] } });
    return listed.map((c) => ({
      id: c.Id,
      name: (c.Names[0] ?? '').replace(/^\//, ''),
      chain: c.Labels['io.cairn.chain'],
      pool: c.Labels['io.cairn.pool'],
      running: c.State === 'running',
    }));
  }

  /** Every container any of this world's workers left (should be none); they are removed too. */
  async leftoverContainers(): Promise<string[]> {
    const left: string[] = [];
    for (const workerId of this.workerIds) {
      for (const container of await this.containersOf(workerId)) {
        left.push(container.name);
        await this.docker
          .getContainer(container.id)
          .remove({ force: true })
          .catch(() => undefined);
      }
    }
    return left;
  }

  async dispose(): Promise<void> {
    for (const service of this.running) await service.stop().catch(() => undefined);
    await this.leftoverContainers();
    // A runtime killed by a test leaves its agent socket directory behind.
    for (const workerId of this.workerIds) await rm(join(defaultAgentSocketRoot(), workerId), { recursive: true, force: true });
    const jsm = await jetstreamManager(this.nc);
    for (const stream of [this.names.stream, bucketStreamName(this.names.workers), bucketStreamName(this.names.leases), this.artifacts.stream]) {
      await jsm.streams.delete(stream).catch(() => false);
    }
    await this.log.close();
    await this.nc.close();
    await rm(this.artifactDir, { recursive: true, force: true });
  }
}

export function spec(overrides: Partial<RunSpec> = {}): RunSpec {
  return { name: 'runtime test', steps: [{ argv: ['sh', '-c', 'echo hello'] }], ...overrides };
}

export function ofType<T extends EvidenceReceipt['type']>(chain: readonly EvidenceReceipt[], type: T): EvidenceReceiptOf<T>[] {
  return chain.filter((r): r is EvidenceReceiptOf<T> => r.type === type);
}
