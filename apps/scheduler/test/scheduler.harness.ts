import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import type { GrantedCaps, ReceiptEnvelope, RunSpec } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import { bucketStreamName, LeaseStore, PlacementQueue, WorkerDrains, WorkerRegistry } from '@cairn/operational';
import type { RegisteredWorker } from '@cairn/operational';
import { compileCache, testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { approvalsBucketFor, drainsBucketFor, queueBucketFor } from '@cairn/config';
import { JsonLogger } from '@cairn/service-kit';
import { ApprovalDeadlines } from '../src/approval-deadlines.store.js';
import { Placements } from '../src/placements.service.js';
import { SchedulingHandler } from '../src/scheduling.handler.js';
import { SerialGate } from '../src/serial-gate.js';
import { SchedulerConfigSchema } from '../src/scheduler.config.js';
import type { SchedulerConfig } from '../src/scheduler.config.js';

export const BUSYBOX = 'cairn/sandbox-busybox:1';
export const BUSYBOX_DIGEST = `sha256:${'b'.repeat(64)}`;
export const CAPS: GrantedCaps = { wall_seconds: 60, memory_mib: 256, pids: 64, disk_mib: 256, cpus: 1 };

/** The streams, buckets and clients one test file owns, and their clean-up. */
export interface SchedulerWorld {
  nc: NatsConnection;
  log: EvidenceLog;
  registry: WorkerRegistry;
  /** Operators' drains (ADR 0026), as the gateway writes them. */
  drains: WorkerDrains;
  leases: LeaseStore;
  /** The scheduler's placement queue (`<leases>_queue`). */
  queue: PlacementQueue;
  /** A handler and its placements as the scheduler module wires them, driven directly (no reactor). */
  scheduler(overrides?: Record<string, string>): { handler: SchedulingHandler; placements: Placements };
  /** Environment for a service process (or `loadConfig`) pointed at this world. */
  env: Record<string, string>;
  config(overrides?: Record<string, string>): SchedulerConfig;
  chain(runId: string): Promise<ReceiptEnvelope[]>;
  /** A run as intake and policy leave it: `run.submitted` then `policy.decided`. */
  decidedRun(options?: { decision?: 'allow' | 'hold' | 'deny'; image?: string; caps?: GrantedCaps; tenant?: string; retries?: number }): Promise<string>;
  dispose(): Promise<void>;
}

export async function createSchedulerWorld(name: string, extraStreams: string[] = []): Promise<SchedulerWorld> {
  const nc = await connect({ servers: testNatsUrl() });
  const env: Record<string, string> = {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_EVIDENCE_STREAM: uniqueName(`${name}_EVIDENCE`).toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName(`${name}_ev`).toLowerCase(),
    CAIRN_COMMAND_STREAM: uniqueName(`${name}_CMDS`).toUpperCase(),
    CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName(`${name}_cmd`).toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName(`${name}_workers`),
    CAIRN_LEASES_BUCKET: uniqueName(`${name}_leases`),
  };
  const log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream: env.CAIRN_EVIDENCE_STREAM!, subjectPrefix: env.CAIRN_EVIDENCE_SUBJECT_PREFIX! });
  const registry = await WorkerRegistry.open(nc, { bucket: env.CAIRN_WORKERS_BUCKET! });
  const drains = await WorkerDrains.open(nc, { bucket: drainsBucketFor(env.CAIRN_WORKERS_BUCKET!) });
  const leases = await LeaseStore.open(nc, { bucket: env.CAIRN_LEASES_BUCKET! });
  const queue = await PlacementQueue.open(nc, { bucket: queueBucketFor(env.CAIRN_LEASES_BUCKET!) });
  const logger = new JsonLogger('scheduler', 'error');

  async function chain(runId: string): Promise<ReceiptEnvelope[]> {
    const out: ReceiptEnvelope[] = [];
    for await (const stored of log.readChain(runId)) out.push(stored.receipt);
    return out;
  }

  return {
    nc,
    log,
    registry,
    drains,
    leases,
    queue,
    env,
    config: (overrides = {}) => loadConfig(SchedulerConfigSchema, { ...env, ...overrides }),
    scheduler(overrides = {}) {
      const config = loadConfig(SchedulerConfigSchema, { ...env, ...overrides });
      const placements = new Placements(registry, drains, leases, queue, new SerialGate(), log, 'scheduler', config, logger);
      const handler = new SchedulingHandler(leases, new ApprovalDeadlines(nc, approvalsBucketFor(config.CAIRN_LEASES_BUCKET)), placements, logger);
      return { handler, placements };
    },
    chain,
    async decidedRun(options = {}) {
      const runId = `run_${uniqueName('sch').toLowerCase()}`;
      const tenant = options.tenant ?? 'acme';
      const spec: RunSpec = { name: 'scheduled', steps: [{ argv: ['true'] }], ...(options.retries === undefined ? {} : { retries: options.retries }) };
      await log.append(runId, {
        type: 'run.submitted',
        actor: 'intake',
        tenant,
        causation: null,
        fields: { spec, spec_sha256: sha256Hex(canonicalJson(spec)), submitted_by: 'key:k1', idempotency_key_sha256: sha256Hex(runId) },
      });
      const decision = options.decision ?? 'allow';
      const granted = decision === 'deny' ? { error_code: 'E_POLICY_DENIED' } : { caps: options.caps ?? CAPS, image: options.image ?? `${BUSYBOX}@${BUSYBOX_DIGEST}` };
      await log.append(runId, {
        type: 'policy.decided',
        actor: 'policy',
        tenant,
        causation: `${runId}:1`,
        fields: { decision, policy_version: 'c'.repeat(64), reasons: decision === 'allow' ? [] : ['because'], ...granted },
      });
      return runId;
    },
    async dispose() {
      queue.close();
      drains.close();
      await log.close();
      const jsm = await jetstreamManager(nc);
      for (const stream of [
        env.CAIRN_EVIDENCE_STREAM!,
        env.CAIRN_COMMAND_STREAM!,
        bucketStreamName(env.CAIRN_WORKERS_BUCKET!),
        bucketStreamName(drainsBucketFor(env.CAIRN_WORKERS_BUCKET!)),
        bucketStreamName(env.CAIRN_LEASES_BUCKET!),
        bucketStreamName(approvalsBucketFor(env.CAIRN_LEASES_BUCKET!)),
        bucketStreamName(queueBucketFor(env.CAIRN_LEASES_BUCKET!)),
        ...extraStreams,
      ]) {
        await jsm.streams.delete(stream).catch(() => false);
      }
      await nc.close();
    },
  };
}

/** A live worker record (its heartbeat stays fresh for the test's length). */
export function fakeWorker(workerId: string, overrides: Partial<RegisteredWorker> = {}): RegisteredWorker {
  return {
    workerId,
    capacity: { slots: 4, memoryMiB: 8192, cpus: 4, diskMiB: 8192 },
    isolation: ['docker'],
    draining: false,
    healthy: true,
    lastHeartbeatAt: Date.now() + 600_000,
    inFlight: [],
    images: { [BUSYBOX]: BUSYBOX_DIGEST },
    ...overrides,
  };
}

export async function until<T>(what: string, probe: () => Promise<T | null | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A service started as a real process from its build (`npm run build` first). */
export interface ServiceProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function startProcess(main: string, env: Record<string, string>): ServiceProcess {
  const child = spawn(process.execPath, [main], { env: { PATH: process.env.PATH ?? '', ...compileCache(), ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => output, exited };
}

/** Kills what is still running (SIGKILL: a test's leftovers need no grace). */
export async function killAll(processes: readonly ServiceProcess[]): Promise<void> {
  for (const p of processes) {
    if (p.child.exitCode === null && p.child.signalCode === null) {
      p.child.kill('SIGKILL');
      await p.exited;
    }
  }
}
