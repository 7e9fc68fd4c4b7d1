import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseEvidenceReceipt } from '@cairn/contracts';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCairn } from './cli.harness.js';

const QUICKSTART = fileURLToPath(new URL('../../../tools/dist/quickstart.js', import.meta.url));
const stream = uniqueName('CLI_QUICKSTART_E2E');
const env = {
  PATH: process.env.PATH ?? '',
  NO_COLOR: '1',
  CAIRN_NATS_URL: testNatsUrl(),
  CAIRN_EVIDENCE_STREAM: stream,
  CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('cli_quickstart_e2e').toLowerCase(),
};
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-quickstart-e2e-'));
});

afterAll(async () => {
  const nc = await connect({ servers: testNatsUrl() });
  try {
    await (await jetstreamManager(nc)).streams.delete(stream).catch(() => false);
  } finally {
    await nc.close();
  }
  await rm(dir, { recursive: true, force: true });
});

function runQuickstart(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [QUICKSTART], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('the quick start', () => {
  it('appends a sample run that matches the contracts, exports it, verifies it and shows a tampered copy fail', async () => {
    const run = await runQuickstart();
    expect(run.stderr).not.toContain('error');
    expect(run.code).toBe(0);

    const runId = /run {8}(run_quickstart_[a-z0-9_]+)/.exec(run.stdout)?.[1];
    expect(runId).toBeDefined();
    const files = (await readdir(join(dir, '.cairn', 'quickstart'))).sort();
    expect(files).toEqual([`${runId}.jsonl`, `${runId}.tampered.jsonl`]);

    const chainFile = join(dir, '.cairn', 'quickstart', `${runId}.jsonl`);
    const receipts = (await readFile(chainFile, 'utf8')).trimEnd().split('\n').map((line) => JSON.parse(line) as unknown);
    expect(receipts.map((r) => parseEvidenceReceipt(r).ok)).toEqual(receipts.map(() => true));
    const types = receipts.map((r) => (r as { type: string }).type);
    expect(types[0]).toBe('run.submitted');
    expect(types.at(-1)).toBe('run.sealed');
    for (const type of ['policy.decided', 'run.scheduled', 'sandbox.created', 'step.started', 'step.completed', 'sandbox.destroyed', 'run.executed', 'kernel.facts', 'verification.completed', 'grade.recorded']) {
      expect(types).toContain(type);
    }

    const verified = await runCairn(['verify', chainFile, '--json']);
    expect(verified.code).toBe(0);
    const { headHash } = JSON.parse(verified.stdout) as { headHash: string };
    expect(run.stdout).toContain(`head ${headHash}`);
    expect(run.stdout).toContain(`npx --no-install cairn verify .cairn/quickstart/${runId}.jsonl`);

    const tampered = await runCairn(['verify', join(dir, '.cairn', 'quickstart', `${runId}.tampered.jsonl`), '--json']);
    expect(tampered.code).toBe(1);
    const seq = Number(/E_CHAIN_BROKEN at seq (\d+)/.exec(run.stdout)?.[1]);
    expect(JSON.parse(tampered.stdout)).toMatchObject({ error: { code: 'E_CHAIN_BROKEN', details: { firstBadSeq: seq } } });
  });

  it('says what to start when NATS is unreachable, exit 1', async () => {
    const child = spawn(process.execPath, [QUICKSTART], { cwd: dir, env: { ...env, CAIRN_NATS_URL: 'nats://127.0.0.1:1' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(1);
    expect(stderr).toMatch(/error E_UNAVAILABLE: .*tools\/ensure-services\.sh/);
  });
});
