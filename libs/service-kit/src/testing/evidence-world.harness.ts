// Test harness for the services that react to executed runs (kernel, verifier, grader): one test
// file's own evidence stream and subject prefix (uniqueName) and artifact object store, removed by dispose().
import 'reflect-metadata';
import { NatsArtifactStore } from '@cairn/artifact-store';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { tlogNamesFor } from '@cairn/config';
import { verifyChain } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import { compileCache, testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import type { PlannedEvent, PlannedRun } from './executed-run.fixture.js';

export const TENANT = 'acme';

export interface EvidenceWorld {
  nc: NatsConnection;
  log: EvidenceLog;
  /** The world's artifact store, as the runtime writes it (the services get only its bucket's name). */
  store: NatsArtifactStore;
  /** Environment for a service (its `loadConfig`, or a process) pointed at this world. */
  env: Record<string, string>;
  runId(label: string): string;
  /** Stores the run's bytes, then appends its events in order (up to `upTo` of them). */
  appendRun(runId: string, planned: PlannedRun, options?: { upTo?: number }): Promise<void>;
  append(runId: string, event: PlannedEvent): Promise<ReceiptEnvelope>;
  chain(runId: string): Promise<ReceiptEnvelope[]>;
  /** The chain once a receipt of `type` is on it. */
  chainWith(runId: string, type: string, ms?: number): Promise<ReceiptEnvelope[]>;
  /** Replaces stored bytes through the raw object store API, as rot or tampering would. */
  corrupt(sha256: string, bytes: Uint8Array): Promise<void>;
  dispose(): Promise<void>;
}

export async function createEvidenceWorld(name: string, options: { duplicateWindowMs?: number } = {}): Promise<EvidenceWorld> {
  const nc = await connect({ servers: testNatsUrl() });
  const env: Record<string, string> = {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_EVIDENCE_STREAM: uniqueName(`${name}_EVIDENCE`).toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName(`${name}_ev`).toLowerCase(),
    CAIRN_ARTIFACT_BUCKET: uniqueName(`${name}_artifacts`),
  };
  const log = await EvidenceLog.fromConnection(nc, {
    servers: testNatsUrl(),
    stream: env.CAIRN_EVIDENCE_STREAM!,
    subjectPrefix: env.CAIRN_EVIDENCE_SUBJECT_PREFIX!,
    ...(options.duplicateWindowMs === undefined ? {} : { duplicateWindowMs: options.duplicateWindowMs }),
  });
  const store = await NatsArtifactStore.open(nc, { bucket: env.CAIRN_ARTIFACT_BUCKET!, create: { maxBytes: 64 * 1024 * 1024 } });

  async function chain(runId: string): Promise<ReceiptEnvelope[]> {
    const out: ReceiptEnvelope[] = [];
    for await (const stored of log.readChain(runId)) out.push(stored.receipt);
    return out;
  }

  async function append(runId: string, event: PlannedEvent): Promise<ReceiptEnvelope> {
    const { receipt } = await log.append(runId, {
      type: event.type,
      actor: event.actor,
      tenant: TENANT,
      causation: event.causation,
      fields: event.fields,
      ...(event.key === undefined ? {} : { key: event.key }),
    });
    return receipt;
  }

  return {
    nc,
    log,
    store,
    env,
    runId: (label) => `run_${uniqueName(label).toLowerCase()}`,
    async appendRun(runId, planned, { upTo } = {}) {
      for (const bytes of planned.blobs.values()) await store.put(bytes);
      for (const event of planned.events.slice(0, upTo)) await append(runId, event);
    },
    append,
    chain,
    chainWith: (runId, type, ms) =>
      until(`${type} on ${runId}`, async () => {
        const receipts = await chain(runId);
        return receipts.some((r) => r.type === type) ? receipts : null;
      }, ms),
    async corrupt(sha256, bytes) {
      await (await new Objm(nc).open(store.bucket)).putBlob({ name: sha256 }, bytes);
    },
    async dispose() {
      await log.close();
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(env.CAIRN_EVIDENCE_STREAM!).catch(() => false);
      await jsm.streams.delete(store.stream).catch(() => false);
      // A grader with a seal key keeps the log of seal heads beside the evidence stream.
      const tlog = tlogNamesFor(env.CAIRN_EVIDENCE_STREAM!, env.CAIRN_EVIDENCE_SUBJECT_PREFIX!);
      for (const stream of [tlog.stream, `KV_${tlog.checkpointBucket}`]) await jsm.streams.delete(stream).catch(() => false);
      await nc.close();
    },
  };
}

/** The chain verifies from genesis, ends with `run.sealed`, and the seal covers the receipt before it. */
export function expectSealedChain(receipts: readonly ReceiptEnvelope[]): { ok: boolean; problems: string[] } {
  const problems: string[] = [];
  const verification = verifyChain(receipts);
  if (!verification.ok) problems.push(`chain: ${verification.message}`);
  const seals = receipts.filter((r) => r.type === 'run.sealed');
  if (seals.length !== 1) problems.push(`${seals.length} seals`);
  const last = receipts.at(-1);
  if (last?.type !== 'run.sealed') problems.push(`the last receipt is ${last?.type ?? 'none'}`);
  else if (last.evidence_digest !== last.prev_hash) problems.push('the seal does not cover the receipt before it');
  return { ok: problems.length === 0, problems };
}

export async function until<T>(what: string, probe: () => Promise<T | null | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** JSON log lines a service in this process writes to stderr, captured while `start()`ed. */
export class StderrCapture {
  readonly lines: Record<string, unknown>[] = [];
  private restore: (() => void) | null = null;

  start(): void {
    const stream = process.stderr;
    const original = stream.write.bind(stream);
    const patched = (chunk: unknown, ...rest: unknown[]): boolean => {
      if (typeof chunk === 'string') this.capture(chunk);
      return Reflect.apply(original, stream, [chunk, ...rest]) as boolean;
    };
    stream.write = patched;
    this.restore = () => {
      stream.write = original;
    };
  }

  stop(): void {
    this.restore?.();
    this.restore = null;
  }

  private capture(chunk: string): void {
    for (const line of chunk.split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        this.lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // not one of ours
      }
    }
  }
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
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { child, output: () => output, exited };
}

/** Stops what is still running: SIGTERM, then SIGKILL after a grace. */
export async function stopAll(processes: readonly ServiceProcess[]): Promise<void> {
  for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
  await Promise.race([Promise.all(processes.map((p) => p.exited)), sleep(3000)]);
  for (const p of processes) {
    if (p.child.exitCode === null && p.child.signalCode === null) {
      p.child.kill('SIGKILL');
      await p.exited;
    }
  }
}
