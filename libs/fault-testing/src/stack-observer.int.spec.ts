import { EvidenceLog } from '@cairn/evidence-log';
import { createDataSource, rebuildProjections } from '@cairn/persistence';
import { runLifecycleEvents } from '@cairn/persistence/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatReport } from './invariants.js';
import { checkStack, scenarioClock } from './stack-observer.js';
import type { FaultStack } from './stack-observer.js';

// @cairn/testing is a testing lib too, out of this one's reach (module boundaries): its few helpers, here.
const testNatsUrl = () => process.env.CAIRN_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
const testDatabaseUrl = () => process.env.CAIRN_TEST_DATABASE_URL ?? 'postgres://cairn:cairn@127.0.0.1:5432/cairn';
const uniqueName = (prefix: string) => `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;

interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

async function createTestDatabase(prefix: string): Promise<TestDatabase> {
  const name = uniqueName(prefix).toLowerCase();
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: testDatabaseUrl() });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE "${name}"`);
  const url = new URL(testDatabaseUrl());
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`) };
}

let nc: NatsConnection;
let log: EvidenceLog;
let db: TestDatabase;
let stack: FaultStack;
const runId = `run_${uniqueName('obs').toLowerCase()}`;

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  const evidenceStream = uniqueName('OBS_EV').toUpperCase();
  const subjectPrefix = uniqueName('obs.ev').toLowerCase();
  log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream: evidenceStream, subjectPrefix });
  for (const [i, event] of runLifecycleEvents(runId, 1).entries()) {
    await log.append(runId, { type: event.type, actor: event.actor, tenant: 'acme', causation: i === 0 ? null : `${runId}:${i}`, key: String(i), fields: event.fields });
  }
  // The "live" projections: built by the product's rebuild, as a projector would have left them.
  db = await createTestDatabase('cairn_obs');
  await rebuildProjections({ url: db.url, log });
  stack = { nc, natsUrl: testNatsUrl(), evidenceStream, subjectPrefix, workerIds: [], databaseUrl: db.url, databaseServerUrl: testDatabaseUrl() };
});

afterAll(async () => {
  await (await jetstreamManager(nc)).streams.delete(stack.evidenceStream).catch(() => false);
  await log.close();
  await nc.close();
  await db.drop();
});

describe('checkStack on a real stream and database', () => {
  it('reads every chain from the stream and compares the projections with a rebuild of its own: all hold', async () => {
    const report = await checkStack(stack, { acknowledged: [runId] }, scenarioClock());
    expect(report.ok, formatReport(report)).toBe(true);
    expect(report.chains).toEqual({ [runId]: runLifecycleEvents(runId, 1).length });
    expect(report.invariants.P).toMatchObject({ checked: true, ok: true });
  });

  it('a row edited in PostgreSQL is reported by P, never trusted', async () => {
    const live = createDataSource(db.url, { poolSize: 1 });
    await live.initialize();
    try {
      await live.query(`UPDATE runs SET state = 'FAILED' WHERE run_id = $1`, [runId]);
    } finally {
      await live.destroy();
    }
    const report = await checkStack(stack, { acknowledged: [runId] }, scenarioClock());
    expect(report.invariants.P.ok).toBe(false);
    expect(report.invariants.P.findings).toEqual([expect.stringMatching(/^runs: row 0 differs: live .*"state": ?"FAILED".* ≠ rebuilt .*"state": ?"SEALED"/)]);
    // The log itself is untouched: the other invariants still hold.
    expect(report.invariants.C.ok && report.invariants.T.ok && report.invariants.L.ok).toBe(true);
  });
});
