import { createHash } from 'node:crypto';
import { EvidenceLog } from '@cairn/evidence-log';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closedLoopbackPort, runCairn } from './cli.harness.js';

const stream = uniqueName('CLI_PROJECTIONS_E2E');
const subjectPrefix = uniqueName('cli_projections_e2e').toLowerCase();
const sha = (text: string) => createHash('sha256').update(text).digest('hex');
const submitted = (name: string) => ({
  spec: { name, steps: [{ argv: ['true'] }] },
  spec_sha256: sha(name),
  submitted_by: 'key:e2e',
  idempotency_key_sha256: sha(`idem:${name}`),
});

let db: TestDatabase;
let log: EvidenceLog;
let env: Record<string, string>;
const deniedRun = `run_${uniqueName('denied').toLowerCase()}`;
const openRun = `run_${uniqueName('open').toLowerCase()}`;
const heads = new Map<string, { seq: number; hash: string }>();

beforeAll(async () => {
  db = await createTestDatabase('cairn_cli_e2e');
  env = { CAIRN_NATS_URL: testNatsUrl(), CAIRN_EVIDENCE_STREAM: stream, CAIRN_EVIDENCE_SUBJECT_PREFIX: subjectPrefix, CAIRN_DATABASE_URL: db.url };
  log = await EvidenceLog.connect({ servers: testNatsUrl(), stream, subjectPrefix });

  const base = { tenant: 'acme', causation: null };
  const first = await log.append(deniedRun, { ...base, type: 'run.submitted', actor: 'intake', fields: submitted('denied') });
  const decided = await log.append(deniedRun, {
    ...base,
    type: 'policy.decided',
    actor: 'policy',
    causation: `${deniedRun}:${first.receipt.seq}`,
    fields: { decision: 'deny', policy_version: sha('policy'), reasons: ['memory over the frozen cap'], error_code: 'E_POLICY_DENIED' },
  });
  const sealed = await log.append(deniedRun, {
    ...base,
    type: 'run.sealed',
    actor: 'grader',
    causation: `${deniedRun}:${decided.receipt.seq}`,
    fields: { final_state: 'REJECTED', evidence_digest: decided.receipt.hash, error_code: 'E_POLICY_DENIED' },
  });
  heads.set(deniedRun, { seq: sealed.receipt.seq, hash: sealed.receipt.hash });
  const open = await log.append(openRun, { ...base, tenant: 'default', type: 'run.submitted', actor: 'intake', fields: submitted('open') });
  heads.set(openRun, { seq: open.receipt.seq, hash: open.receipt.hash });

  // A message under the prefix that is not a receipt: the rebuild must record it as poison, not stop.
  const nc = await connect({ servers: testNatsUrl() });
  try {
    const js = (await jetstreamManager(nc)).jetstream();
    await js.publish(`${subjectPrefix}.run_poison-e2e.run.submitted`, new TextEncoder().encode('{"not":"a receipt"}'));
  } finally {
    await nc.close();
  }
});

afterAll(async () => {
  await log?.close();
  const nc = await connect({ servers: testNatsUrl() });
  try {
    await (await jetstreamManager(nc)).streams.delete(stream).catch(() => false);
  } finally {
    await nc.close();
  }
  await db?.drop();
});

async function rows<T>(sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

describe('cairn projections rebuild', () => {
  it('migrates an empty database and rebuilds runs that match the appended chains', async () => {
    const run = await runCairn(['projections', 'rebuild'], env);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^OK {2}rebuilt projections: 4 events, 1 poison, 2 runs {2}\(\d+\.\d\d s, \d+ events\/s, up to stream seq 5\)\n$/);
    expect(run.stderr).toContain('running migrations');

    const runs = await rows<{ run_id: string; tenant: string; state: string; error_code: string | null; last_seq: number; head_hash: string; event_count: number; sealed: boolean }>(
      'SELECT run_id, tenant, state, error_code, last_seq, head_hash, event_count, sealed FROM runs ORDER BY run_id',
    );
    expect(runs).toEqual(
      [
        { run_id: deniedRun, tenant: 'acme', state: 'REJECTED', error_code: 'E_POLICY_DENIED', last_seq: 3, head_hash: heads.get(deniedRun)!.hash, event_count: 3, sealed: true },
        { run_id: openRun, tenant: 'default', state: 'SUBMITTED', error_code: null, last_seq: 1, head_hash: heads.get(openRun)!.hash, event_count: 1, sealed: false },
      ].sort((a, b) => a.run_id.localeCompare(b.run_id)),
    );
    const poison = await rows<{ subject: string }>('SELECT subject FROM poison_events');
    expect(poison).toEqual([{ subject: `${subjectPrefix}.run_poison-e2e.run.submitted` }]);
  });

  it('gives the same tables when run again, and reports them as JSON', async () => {
    const before = await rows<Record<string, unknown>>('SELECT * FROM runs ORDER BY run_id');
    const run = await runCairn(['projections', 'rebuild', '--json'], env);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: true, events: 4, poison: 1, runs: 2, lastStreamSeq: 5, eventsPerSecond: expect.any(Number) as number });
    expect(await rows<Record<string, unknown>>('SELECT * FROM runs ORDER BY run_id')).toEqual(before);
  });

  it('reports PostgreSQL unreachable as E_UNAVAILABLE naming CAIRN_DATABASE_URL, without the password', async () => {
    const port = await closedLoopbackPort();
    const run = await runCairn(['projections', 'rebuild'], { ...env, CAIRN_DATABASE_URL: `postgres://cairn:s3cret@127.0.0.1:${port}/cairn` });
    expect(run.code).toBe(1);
    const errors = run.stderr.split('\n').filter((line) => line.startsWith('error'));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(new RegExp(`^error E_UNAVAILABLE: cannot reach PostgreSQL at postgres://127.0.0.1:${port}/cairn \\(CAIRN_DATABASE_URL\\): .*ECONNREFUSED.*tools/ensure-services.sh`));
    expect(run.stderr).not.toContain('s3cret');
    expect(run.stderr).not.toContain('    at ');
  });

  it('reports NATS unreachable as E_UNAVAILABLE naming CAIRN_NATS_URL', async () => {
    const port = await closedLoopbackPort();
    const run = await runCairn(['projections', 'rebuild', '--json'], { ...env, CAIRN_NATS_URL: `nats://127.0.0.1:${port}` });
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: false, error: { code: 'E_UNAVAILABLE', details: { server: 'NATS', variable: 'CAIRN_NATS_URL' } } });
  });
});

describe('cairn projections check', () => {
  it('agrees with the log once rebuilt, and says so as JSON too', async () => {
    expect((await runCairn(['projections', 'rebuild'], env)).code).toBe(0);
    const run = await runCairn(['projections', 'check'], env);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^OK {2}the projections are the log's fold: 4 events, 1 poison, 2 runs, 0 sandboxes up to stream seq 5 {2}\(\d+\.\d\d s\)\n$/);
    const json = await runCairn(['projections', 'check', '--json'], env);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, lastStreamSeq: 5, events: 4, runs: 2, driftCount: 0 });
  });

  it('names a row edited in PostgreSQL, exits 1 E_CONFLICT, changes nothing; a rebuild puts the log back', async () => {
    await rows(`UPDATE runs SET state = 'SEALED', error_code = NULL WHERE run_id = '${deniedRun}'`);
    const run = await runCairn(['projections', 'check'], env);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`  runs ${deniedRun}: edited — error_code: projections null, log "E_POLICY_DENIED"; state: projections "SEALED", log "REJECTED"\n`);
    expect(run.stderr).toMatch(/error E_CONFLICT: the projections disagree with the log in 1 row \(compared up to stream seq 5\); the log is the truth: `cairn projections rebuild` replaces them/);
    const json = await runCairn(['projections', 'check', '--json'], env);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({
      ok: false,
      error: { code: 'E_CONFLICT', details: { driftCount: 1, drift: [{ table: 'runs', key: deniedRun, kind: 'edited', columns: ['error_code', 'state'] }] } },
    });
    // The check wrote nothing: the edit is still there until a rebuild replaces it.
    expect(await rows<{ state: string }>(`SELECT state FROM runs WHERE run_id = '${deniedRun}'`)).toEqual([{ state: 'SEALED' }]);
    expect((await runCairn(['projections', 'rebuild'], env)).code).toBe(0);
    expect((await runCairn(['projections', 'check'], env)).code).toBe(0);
  });

  it('refuses a --limit that is not a positive whole number as E_INPUT', async () => {
    const run = await runCairn(['projections', 'check', '--limit', '0'], env);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('error E_INPUT: --limit takes a whole number from 1 to 999999, not "0"');
  });

  it('reports PostgreSQL unreachable as E_UNAVAILABLE naming CAIRN_DATABASE_URL', async () => {
    const port = await closedLoopbackPort();
    const run = await runCairn(['projections', 'check', '--json'], { ...env, CAIRN_DATABASE_URL: `postgres://cairn:s3cret@127.0.0.1:${port}/cairn` });
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: false, error: { code: 'E_UNAVAILABLE', details: { server: 'PostgreSQL', variable: 'CAIRN_DATABASE_URL' } } });
    expect(run.stdout).not.toContain('s3cret');
  });
});
