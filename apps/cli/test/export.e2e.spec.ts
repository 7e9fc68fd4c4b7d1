import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EvidenceLog } from '@cairn/evidence-log';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closedLoopbackPort, runCairn, sampleChain } from './cli.harness.js';

const stream = uniqueName('CLI_EXPORT_E2E');
const subjectPrefix = uniqueName('cli_export_e2e').toLowerCase();
const env = { CAIRN_NATS_URL: testNatsUrl(), CAIRN_EVIDENCE_STREAM: stream, CAIRN_EVIDENCE_SUBJECT_PREFIX: subjectPrefix };
const runId = `run_${uniqueName('export').toLowerCase()}`;
let dir: string;
let log: EvidenceLog;
let headHash = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-export-e2e-'));
  log = await EvidenceLog.connect({ servers: testNatsUrl(), stream, subjectPrefix });
  let causation: string | null = null;
  for (const [i, type] of ['run.submitted', 'step.started', 'step.completed', 'step.started', 'step.completed', 'run.executed'].entries()) {
    const { receipt } = await log.append(runId, {
      type,
      actor: i === 0 ? 'intake' : 'runtime',
      tenant: 'default',
      causation,
      key: String(i),
      fields: type.startsWith('step.') ? { step: Math.floor(i / 2), argv: ['echo', `line ${i}\nwith "quotes" and ünïcode`] } : {},
    });
    causation = `${runId}:${receipt.seq}`;
    headHash = receipt.hash;
  }
});

afterAll(async () => {
  await log?.close();
  const nc = await connect({ servers: testNatsUrl() });
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(stream).catch(() => false);
  } finally {
    await nc.close();
  }
  await rm(dir, { recursive: true, force: true });
});

describe('cairn export', () => {
  it('writes the chain to a file that `cairn verify` accepts (round trip)', async () => {
    const target = join(dir, `${runId}.jsonl`);
    const exported = await runCairn(['export', runId, '-o', target], env);
    expect(exported.stderr).toBe('');
    expect(exported.code).toBe(0);
    expect(exported.stdout).toBe(`OK  exported 6 receipts  chain ${runId}  head ${headHash}  to ${target}\n`);

    const lines = (await readFile(target, 'utf8')).split('\n');
    expect(lines).toHaveLength(7);
    expect(lines[6]).toBe('');
    const receipts = lines.slice(0, 6).map((line) => JSON.parse(line) as { seq: number; run_id: string });
    expect(receipts.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    expect((await readdir(dir)).filter((name) => name.endsWith('.tmp'))).toEqual([]);

    const verified = await runCairn(['verify', target, '--json']);
    expect(verified.code).toBe(0);
    expect(JSON.parse(verified.stdout)).toEqual({ ok: true, chainId: runId, count: 6, headHash });
  });

  it('writes the same JSON Lines to stdout, and its summary to stderr', async () => {
    const target = join(dir, 'again.jsonl');
    await runCairn(['export', runId, '--output', target], env);
    const piped = await runCairn(['export', runId], env);
    expect(piped.code).toBe(0);
    expect(piped.stdout).toBe(await readFile(target, 'utf8'));
    expect(piped.stderr).toBe(`exported 6 receipts  chain ${runId}  head ${headHash}\n`);
  });

  it('prints { ok, chainId, count, headHash, file } with --json and -o', async () => {
    const target = join(dir, 'json.jsonl');
    const run = await runCairn(['export', runId, '-o', target, '--json'], env);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ ok: true, chainId: runId, count: 6, headHash, file: target });
  });

  it('reports an unknown chain as E_NOT_FOUND, exit 1, and writes no file', async () => {
    const target = join(dir, 'unknown.jsonl');
    const run = await runCairn(['export', 'run_does-not-exist', '-o', target], env);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe('error E_NOT_FOUND: no chain run_does-not-exist in the evidence log\n');
    expect(await readdir(dir)).not.toContain('unknown.jsonl');
    expect((await readdir(dir)).filter((name) => name.endsWith('.tmp'))).toEqual([]);
    const json = await runCairn(['export', 'sbx_nope', '--json'], env);
    expect(JSON.parse(json.stdout)).toEqual({ ok: false, error: { code: 'E_NOT_FOUND', message: expect.stringContaining('sbx_nope') as string, details: { chainId: 'sbx_nope' } } });
  });

  it('exports a chain that is broken in the log, keeps every receipt, and fails with E_CHAIN_BROKEN', async () => {
    // Written around the evidence log's API, as an attacker with broker access could: seq 2 edited after sealing.
    const brokenId = 'run_broken-in-log';
    const receipts = sampleChain(brokenId, 3).map((r) => (r.seq === 2 ? { ...r, exit_code: 7 } : r));
    const nc = await connect({ servers: testNatsUrl() });
    try {
      const js = (await jetstreamManager(nc)).jetstream();
      for (const receipt of receipts) await js.publish(`${subjectPrefix}.${brokenId}.${String(receipt.type)}`, new TextEncoder().encode(JSON.stringify(receipt)));
    } finally {
      await nc.close();
    }
    const target = join(dir, 'broken.jsonl');
    const run = await runCairn(['export', brokenId, '-o', target, '--json'], env);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: false, error: { code: 'E_CHAIN_BROKEN', details: { firstBadSeq: 2, reason: 'hash_mismatch' } } });
    expect((await readFile(target, 'utf8')).trimEnd().split('\n')).toHaveLength(3);
  });

  it('does not create a missing evidence stream: E_NOT_FOUND, exit 1', async () => {
    const missing = uniqueName('CLI_EXPORT_MISSING');
    const run = await runCairn(['export', runId], { ...env, CAIRN_EVIDENCE_STREAM: missing });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(new RegExp(`^error E_NOT_FOUND: the evidence stream ${missing} does not exist`));
    const nc = await connect({ servers: testNatsUrl() });
    try {
      const jsm = await jetstreamManager(nc);
      await expect(jsm.streams.info(missing)).rejects.toThrow(/stream not found/i);
    } finally {
      await nc.close();
    }
  });

  it('refuses a bad chain id with E_INPUT, exit 2', async () => {
    for (const id of ['RUN_UPPER', 'run_a.b', 'run_>', 'job_1']) {
      const run = await runCairn(['export', id], env);
      expect(run.code, id).toBe(2);
      expect(run.stderr).toMatch(/^error E_INPUT: invalid chain id/);
    }
  });

  it('reports NATS unreachable as E_UNAVAILABLE, exit 1, fast and without a stack trace', async () => {
    const port = await closedLoopbackPort();
    const run = await runCairn(['export', runId], { ...env, CAIRN_NATS_URL: `nats://127.0.0.1:${port}` });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(new RegExp(`^error E_UNAVAILABLE: cannot reach NATS at nats://127.0.0.1:${port} \\(CAIRN_NATS_URL\\): .*tools/ensure-services.sh`));
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.ms).toBeLessThan(5_000);
    const json = await runCairn(['export', runId, '--json'], { ...env, CAIRN_NATS_URL: `nats://127.0.0.1:${port}` });
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: false, error: { code: 'E_UNAVAILABLE', details: { server: 'NATS', variable: 'CAIRN_NATS_URL' } } });
  });

  it('refuses a malformed CAIRN_NATS_URL as bad configuration, naming the variable', async () => {
    const run = await runCairn(['export', runId], { ...env, CAIRN_NATS_URL: 'http://nope' });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^error E_INPUT: invalid configuration: CAIRN_NATS_URL/);
  });
});
