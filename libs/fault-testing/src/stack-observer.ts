import { EvidenceLog } from '@cairn/evidence-log';
import { LeaseStore, PlacementQueue } from '@cairn/operational';
import { createDataSource, rebuildProjections } from '@cairn/persistence';
import { dumpProjections } from '@cairn/persistence/testing';
import { createDockerClient } from '@cairn/sandbox-docker';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { NatsConnection } from '@nats-io/transport-node';
import { checkInvariants } from './invariants.js';
import type { InvariantInput, InvariantReport, Leftovers } from './invariants.js';

/** The parts of a test's own stack the checker reads; every name is the test's own (`uniqueName`). */
export interface FaultStack {
  nc: NatsConnection;
  natsUrl: string;
  /** The stack's CAIRN_NATS_REPLICAS (default 1): its streams and buckets are opened as they were made. */
  replicas?: number;
  evidenceStream: string;
  subjectPrefix: string;
  /** Worker ids whose containers and networks (`io.cairn.worker`) belong to the test. */
  workerIds: readonly string[];
  /** The lease bucket; with it, R counts leases left. */
  leasesBucket?: string;
  /** The scheduler's placement queue bucket (`<leases>_queue`); with it, R counts its entries. */
  queueBucket?: string;
  /** The projections' database; with it, P compares them with a rebuild into a fresh database of its own. */
  databaseUrl?: string;
  /**
   * The stack is still up with its warm pool: an idle pool container (no `io.cairn.chain` label yet)
   * is the pool's, not something a chain left. Checked after the stack stopped, it counts.
   */
  warmPoolLive?: boolean;
  /** The server the rebuild's own database is made on (a URL whose database the role may connect to): `testDatabaseUrl()` of `@cairn/testing`. */
  databaseServerUrl?: string;
}

export interface ScenarioRuns {
  /** Chain ids the system acknowledged. */
  acknowledged: readonly string[];
  /** Run chains that must have ended (default: every acknowledged run). */
  mustEnd?: readonly string[];
}

/** When a scenario began (engine events are counted from here); make it before anything is submitted. */
export function scenarioClock(): { startedAt: number } {
  return { startedAt: Date.now() };
}

/** Reads the stack (log, engine, KV, PostgreSQL) and judges every invariant it can. */
export async function checkStack(stack: FaultStack, runs: ScenarioRuns, clock: { startedAt: number }): Promise<InvariantReport> {
  return checkInvariants(await observeStack(stack, runs, clock));
}

export async function observeStack(stack: FaultStack, runs: ScenarioRuns, clock: { startedAt: number }): Promise<InvariantInput> {
  const log = await EvidenceLog.fromConnection(stack.nc, {
    servers: stack.natsUrl,
    stream: stack.evidenceStream,
    subjectPrefix: stack.subjectPrefix,
    ...(stack.replicas === undefined ? {} : { replicas: stack.replicas }),
  });
  try {
    const chains = await readChains(log, stack.subjectPrefix);
    const input: InvariantInput = {
      chains,
      acknowledged: runs.acknowledged,
      ...(runs.mustEnd === undefined ? {} : { mustEnd: runs.mustEnd }),
      containersCreated: await containersCreated(stack.workerIds, clock.startedAt),
      leftovers: await leftovers(stack),
    };
    if (stack.databaseUrl !== undefined) {
      if (stack.databaseServerUrl === undefined) throw new Error('P needs databaseServerUrl beside databaseUrl');
      const lastSeq = await log.lastStreamSeq();
      input.projections = await projectionsAndRebuild(stack.databaseUrl, stack.databaseServerUrl, log, lastSeq);
    }
    return input;
  } finally {
    await log.close();
  }
}

/** Every message of the stream grouped by chain (the subject's token after the prefix), raw, in order. */
async function readChains(log: EvidenceLog, prefix: string): Promise<Map<string, unknown[]>> {
  const chains = new Map<string, unknown[]>();
  const decoder = new TextDecoder();
  for await (const message of log.readAll()) {
    const chainId = message.subject.slice(prefix.length + 1).split('.')[0] ?? '';
    let receipt: unknown;
    try {
      receipt = JSON.parse(decoder.decode(message.data));
    } catch {
      receipt = { unparsable: true };
    }
    const chain = chains.get(chainId) ?? [];
    chain.push(receipt);
    chains.set(chainId, chain);
  }
  return chains;
}

interface EngineEvent {
  Action?: string;
  Actor?: { ID?: string; Attributes?: Record<string, string> };
}

/** Containers the engine created for each chain since `since` (its create events, labels included). */
async function containersCreated(workerIds: readonly string[], since: number): Promise<Map<string, string[]>> {
  const docker = createDockerClient();
  const created = new Map<string, string[]>();
  for (const workerId of workerIds) {
    const stream = await docker.getEvents({
      since: Math.floor(since / 1000) - 1,
      until: Math.ceil(Date.now() / 1000) + 1,
      filters: { type: ['container'], event: ['create'], label: [`io.cairn.worker=${workerId}`] },
    });
    let text = '';
    for await (const chunk of stream) text += chunk.toString();
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      const event = JSON.parse(line) as EngineEvent;
      const chain = event.Actor?.Attributes?.['io.cairn.chain'];
      if (chain === undefined) continue; // a warm-pool container: it takes a chain when claimed
      const names = created.get(chain) ?? [];
      names.push(event.Actor?.Attributes?.name ?? event.Actor?.ID ?? '?');
      created.set(chain, names);
    }
  }
  return created;
}

async function leftovers(stack: FaultStack): Promise<Leftovers> {
  const docker = createDockerClient();
  const containers: string[] = [];
  const networks: string[] = [];
  for (const workerId of stack.workerIds) {
    const label = [`io.cairn.worker=${workerId}`];
    for (const c of await docker.listContainers({ all: true, filters: { label } })) {
      if (stack.warmPoolLive === true && c.Labels['io.cairn.chain'] === undefined) continue;
      containers.push(`${(c.Names[0] ?? c.Id).replace(/^\//, '')} (${c.State})`);
    }
    for (const n of await docker.listNetworks({ filters: { label } })) networks.push(n.Name);
  }
  const leases = stack.leasesBucket === undefined ? [] : (await (await LeaseStore.open(stack.nc, { bucket: stack.leasesBucket, ...replicasOf(stack) })).list()).map((l) => `${l.run_id} (${l.lease_id}, ${l.worker_id})`);
  const queueEntries = stack.queueBucket === undefined ? [] : (await (await PlacementQueue.open(stack.nc, { bucket: stack.queueBucket, ...replicasOf(stack) })).list()).map((e) => e.chain_id);
  return { containers, networks, leases, queueEntries };
}

function replicasOf(stack: FaultStack): { replicas?: number } {
  return stack.replicas === undefined ? {} : { replicas: stack.replicas };
}

/** Waits (bounded) for the live projections to reach the stream's end, then rebuilds into a database of its own and dumps both. */
async function projectionsAndRebuild(databaseUrl: string, serverUrl: string, log: EvidenceLog, lastSeq: number): Promise<NonNullable<InvariantInput['projections']>> {
  const live = createDataSource(databaseUrl, { poolSize: 1, applicationName: 'cairn-fault-check' });
  await live.initialize();
  const fresh = await ownDatabase(serverUrl);
  try {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const rows = await live.query<{ last: number }[]>('SELECT last_stream_seq::float8 AS last FROM projection_positions').catch(() => []);
      if ((rows[0]?.last ?? 0) >= lastSeq) break;
      if (Date.now() > deadline) break; // compared as they are: P reports the difference
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // Migrated and rebuilt from genesis by the product's own rebuild (`cairn projections rebuild`).
    await rebuildProjections({ url: fresh.url, log });
    const rebuilt = createDataSource(fresh.url, { poolSize: 1, applicationName: 'cairn-fault-check' });
    await rebuilt.initialize();
    try {
      return { live: await dumpProjections(live), rebuilt: await dumpProjections(rebuilt) };
    } finally {
      await rebuilt.destroy();
    }
  } finally {
    await live.destroy();
    await fresh.drop();
  }
}

/** An empty database of the check's own on `serverUrl`, dropped by `drop()`. */
async function ownDatabase(serverUrl: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `cairn_fault_rebuild_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: serverUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE "${name}"`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`) };
}
