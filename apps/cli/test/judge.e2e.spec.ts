import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';

/*
 * A judge you bring through a whole stack (ADR 0030): `cairn up` with CAIRN_JUDGE_URL at an
 * OpenAI-compatible server of the test's own on 127.0.0.1 and the key in a 0600 file. The judge
 * first hangs (a timed-out judgement: `grade.failed`, the run left unsealed, `run --wait` says so),
 * then answers; `cairn regrade` grades the run again without re-running it, and `cairn verify`
 * re-derives the judged score offline.
 */

let stack: TestStack;
let server: Server;
const seen: { authorization: string | undefined; body: string }[] = [];
const hanging: ServerResponse[] = [];
let hang = true;
const API_KEY = `sk-test-${randomBytes(12).toString('hex')}`;

const SPEC = {
  name: 'judged',
  image: 'cairn/sandbox-busybox:1',
  steps: [{ name: 'report', argv: ['echo', 'all 3 tests passed'] }],
  checks: [
    { id: 'exit', source: 'steps[0].exit_code', op: 'eq', value: 0, weight: 1 },
    { id: 'clear', kind: 'judge', criterion: 'The output says every test passed.', source: 'steps[0].stdout', weight: 4, scale: 4 },
  ],
};

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ authorization: req.headers.authorization, body: Buffer.concat(chunks).toString('utf8') });
      if (hang) return void hanging.push(res);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: '{"score": 3, "reason": "says so"}' }, finish_reason: 'stop' }], usage: { prompt_tokens: 90, completion_tokens: 9, total_tokens: 99 } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  stack = await TestStack.create('judge-e2e', { CAIRN_JUDGE_URL: `http://127.0.0.1:${port}/v1`, CAIRN_JUDGE_MODEL: 'test-judge', CAIRN_JUDGE_TIMEOUT_MS: '1500' });
  const keyFile = join(stack.home, 'judge.key');
  await writeFile(keyFile, `${API_KEY}\n`, { mode: 0o600 });
  stack.env.CAIRN_JUDGE_API_KEY_FILE = keyFile;
  expect((await stack.up()).outcome).toBe('started');
}, 240_000);

afterAll(async () => {
  await stack?.dispose();
  for (const res of hanging) res.destroy();
  await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
});

/** The run's receipt types as projected, once `type` is among them (the projector may trail the chain). */
async function typesOnceThere(runId: string, type: string): Promise<string[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const types = await stack.types(runId);
    if (types.includes(type) || Date.now() > deadline) return types;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('a judge you bring, through the stack', () => {
  it('records a timed-out judge, re-grades on `cairn regrade` without re-running, and verifies offline', async () => {
    const spec = await stack.specFile('judged.json', SPEC);
    const waited = await stack.cairn(['run', spec, '--wait', '--quiet']);
    expect(waited.code).toBe(1);
    expect(waited.stderr).toMatch(/the grade of (run_[0-9a-z]+) failed \(timeout\); it waits unsealed: .*cairn regrade run_/);
    const runId = /the grade of (run_[0-9a-z]+) failed/.exec(waited.stderr)![1]!;
    expect((await typesOnceThere(runId, 'grade.failed')).slice(-3)).toEqual(['verification.completed', 'judge.requested', 'grade.failed']);
    expect((await stack.getRun(runId)).state).toBe('VERIFIED');

    hang = false;
    const regraded = await stack.cairn(['regrade', runId, '--reason', 'judge back', '--json']);
    expect(regraded.code, regraded.stderr).toBe(0);
    expect(JSON.parse(regraded.stdout)).toEqual({ ok: true, runId, duplicate: false });
    const run = await stack.waitForRun(runId, (r) => r.state === 'SEALED');
    expect(run).toMatchObject({ score: 4, maxScore: 5 });
    const types = await typesOnceThere(runId, 'run.sealed');
    expect(types.slice(-5)).toEqual(['grade.requested', 'judge.requested', 'judge.answered', 'grade.recorded', 'run.sealed']);
    expect(types.filter((t) => t === 'step.completed')).toHaveLength(1);

    // REST on the sealed run: 409 E_SEALED; the grade stands.
    const again = await stack.api(`/v1/runs/${runId}/regrade`, { method: 'POST' });
    expect(again.status).toBe(409);
    expect(((await again.json()) as { code: string }).code).toBe('E_SEALED');

    const verified = await stack.cairn(['verify', runId, '--json']);
    expect(verified.code, verified.stderr).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, chainId: runId, judged: 1 });

    // The key went in the Authorization header, and nowhere else: not in a receipt, not in a log.
    expect(seen.length).toBe(2);
    for (const request of seen) expect(request.authorization).toBe(`Bearer ${API_KEY}`);
    const chain = await stack.api(`/v1/runs/${runId}/bundle`);
    expect(await chain.text()).not.toContain(API_KEY);
    expect(await readFile(join(stack.home, 'logs', 'grader.log'), 'utf8')).not.toContain(API_KEY);
  }, 180_000);
});
