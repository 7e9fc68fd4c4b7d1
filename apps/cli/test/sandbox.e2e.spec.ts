import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAIRN_BIN } from './cli.harness.js';
import type { CliRun } from './cli.harness.js';
import { TestStack } from './stack.harness.js';

/*
 * `cairn sandbox …` end to end on one isolated stack (`cairn up`) with the real Docker engine,
 * NATS and PostgreSQL: a session created, files copied in both directions (files, stdin, stdout,
 * binary), programs run with their output streamed live and their exit status passed through,
 * stdin forwarded, a limit hit, another tenant refused, removal — and the sandbox's chain, exported
 * from the evidence log and fetched as a proof bundle, verifies, with no container left behind.
 */

const SMALL = ['--memory', '64', '--cpus', '0.5', '--ttl', '600'];

let stack: TestStack;

interface TimedRun extends CliRun {
  /** ms from the start to the first stdout chunk (NaN when none). */
  firstStdoutMs: number;
  stdoutBytes: Buffer;
}

/** The built CLI with `input` on its stdin (a pipe, not a terminal), timing the first stdout chunk. */
function cairnWith(args: readonly string[], input: string | Buffer | null, extraEnv: Record<string, string> = {}): Promise<TimedRun> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CAIRN_BIN, ...args], {
      env: { PATH: process.env.PATH ?? '', NO_COLOR: '1', ...stack.env, ...extraEnv },
      stdio: [input === null ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let firstStdoutMs = Number.NaN;
    child.stdout?.on('data', (chunk: Buffer) => {
      if (out.length === 0) firstStdoutMs = performance.now() - started;
      out.push(chunk);
    });
    child.stderr?.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      const stdoutBytes = Buffer.concat(out);
      resolve({ code, stdout: stdoutBytes.toString('utf8'), stdoutBytes, stderr: Buffer.concat(err).toString('utf8'), ms: performance.now() - started, firstStdoutMs });
    });
    if (input !== null) child.stdin?.end(input);
  });
}

const sbx = (args: readonly string[], extraEnv: Record<string, string> = {}) => cairnWith(['sandbox', ...args], null, extraEnv);

function json<T = Record<string, unknown>>(run: CliRun): T {
  try {
    return JSON.parse(run.stdout) as T;
  } catch {
    throw new Error(`not JSON (exit ${run.code}):\n${run.stdout}\n${run.stderr}`);
  }
}

async function create(extra: string[] = []): Promise<string> {
  const created = await sbx(['create', ...SMALL, ...extra, '--json']);
  expect(created.code, `${created.stdout}\n${created.stderr}\n${await stack.logs()}`).toBe(0);
  const view = json<{ ok: boolean; id: string; state: string }>(created);
  expect(view).toMatchObject({ ok: true, state: 'READY' });
  expect(view.id).toMatch(/^sbx_/);
  return view.id;
}

async function receiptTypes(id: string): Promise<string[]> {
  const response = await stack.api(`/v1/sandboxes/${id}/events?after=0&limit=1000`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: { type: string }[] }).items.map((r) => r.type);
}

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

beforeAll(async () => {
  stack = await TestStack.create('sbx-cli');
  await stack.up();
}, 180_000);

afterAll(async () => {
  await stack?.dispose();
});

describe('cairn sandbox: a whole session through the CLI', () => {
  it('create → cp in (file, stdin, binary) → exec (streams, exit status, stdin, env, workdir, --json) → cp out (dir, stdout) → ls/show → rm; its chain verifies', async () => {
    // create: the human form prints only the id on stdout.
    const human = await sbx(['create', ...SMALL]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^sbx_[a-z0-9_-]+\n$/);
    expect(human.stderr).toContain('READY');
    const id = human.stdout.trim();

    // cp in: a script keeps its executable bit; stdin; binary bytes.
    const script = join(stack.home, 'hello.sh');
    await writeFile(script, '#!/bin/sh\necho "out: $1"\necho "err: $1" >&2\nexit 3\n');
    await chmod(script, 0o755);
    const copied = await sbx(['cp', script, `${id}:/work/hello.sh`, '--json']);
    expect(copied.code, copied.stderr).toBe(0);
    expect(json(copied)).toMatchObject({ ok: true, sandboxId: id, path: '/work/hello.sh', sha256: sha256(await readFile(script)), seq: expect.any(Number) as number });
    const piped = await cairnWith(['sandbox', 'cp', '-', `${id}:/work/in.txt`], 'line one\nline two\n');
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stdout).toMatch(/^OK {2}18 bytes → sbx_\S+:\/work\/in\.txt {2}sha256 [0-9a-f]{64} {2}seq \d+\n$/);
    const binary = randomBytes(200_000);
    const binaryFile = join(stack.home, 'blob.bin');
    await writeFile(binaryFile, binary);
    expect((await sbx(['cp', binaryFile, `${id}:/tmp/blob.bin`])).code).toBe(0);

    // exec: output to the right streams, and the program's own exit status.
    const ran = await sbx(['exec', id, '--', '/work/hello.sh', 'world']);
    expect(ran.stdout).toBe('out: world\n');
    expect(ran.stderr).toBe('err: world\n');
    expect(ran.code).toBe(3);
    expect((await sbx(['exec', id, '--', 'true'])).code).toBe(0);
    expect((await sbx(['exec', id, '--', 'sh', '-c', 'exit 42'])).code).toBe(42);

    // stdin (not a terminal) is forwarded; --no-stdin leaves it out; env and workdir.
    const cat = await cairnWith(['sandbox', 'exec', id, '--', 'cat'], 'piped into cat\n');
    expect(cat.stdout).toBe('piped into cat\n');
    const noStdin = await cairnWith(['sandbox', 'exec', id, '--no-stdin', '--', 'cat'], 'not forwarded\n');
    expect(noStdin.stdout).toBe('');
    const envRun = await sbx(['exec', id, '--env', 'GREETING=hi there', '--workdir', '/tmp', '--', 'sh', '-c', 'echo "$GREETING"; pwd; sha256sum /tmp/blob.bin; cat /work/in.txt > /out/result.txt']);
    expect(envRun.code, envRun.stderr).toBe(0);
    expect(envRun.stdout).toBe(`hi there\n/tmp\n${sha256(binary)}  /tmp/blob.bin\n`);

    // --json: one ExecResult.
    const asJson = await sbx(['exec', id, '--json', '--', 'sh', '-c', 'printf abc; printf xy >&2; exit 5']);
    expect(asJson.code).toBe(5);
    expect(json(asJson)).toMatchObject({ exitCode: 5, stdout: 'abc', stderr: 'xy', stdoutBytes: 3, stderrBytes: 2, stdoutSha256: sha256('abc'), limitHit: null, sandboxState: 'READY' });

    // cp out: into a directory (keeps the name), to stdout (exact bytes), binary round trip.
    const outDir = join(stack.home, 'out');
    await mkdir(outDir);
    const fetched = await sbx(['cp', `${id}:/out/result.txt`, outDir, '--json']);
    expect(fetched.code, fetched.stderr).toBe(0);
    expect(await readFile(join(outDir, 'result.txt'), 'utf8')).toBe('line one\nline two\n');
    expect(json(fetched)).toMatchObject({ ok: true, bytes: 18, sha256: sha256('line one\nline two\n'), file: join(outDir, 'result.txt') });
    const toStdout = await sbx(['cp', `${id}:/tmp/blob.bin`, '-']);
    expect(toStdout.code).toBe(0);
    expect(toStdout.stdoutBytes.equals(binary)).toBe(true);
    expect(toStdout.stderr).toContain(`200000 bytes ← ${id}:/tmp/blob.bin`);

    // Errors from the sandbox keep their codes: a missing file, a symlink on the way.
    const missing = await sbx(['cp', `${id}:/work/nope.txt`, '-', '--json']);
    expect(missing.code).toBe(1);
    expect(json(missing)).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    expect((await sbx(['exec', id, '--', 'ln', '-s', '/etc', '/work/etc-link'])).code).toBe(0);
    const throughLink = await sbx(['cp', script, `${id}:/work/etc-link/evil`, '--json']);
    expect(throughLink.code).toBe(2);
    expect(json(throughLink)).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
    const readLink = await sbx(['cp', `${id}:/work/etc-link/passwd`, '-', '--json']);
    expect(json(readLink)).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });

    // ls and show.
    const listed = json<{ items: { id: string; state: string }[] }>(await sbx(['ls', '--json']));
    expect(listed.items.find((s) => s.id === id)).toMatchObject({ state: 'READY' });
    expect(json<{ items: { id: string }[] }>(await sbx(['ls', '--state', 'destroyed', '--json'])).items.map((s) => s.id)).not.toContain(id);
    const shown = await sbx(['show', id]);
    expect(shown.stdout).toMatch(new RegExp(`^sandbox  ${id}\\n`));
    expect(shown.stdout).toMatch(/state {4}READY/);
    const view = json<{ operations: number; headSeq: number }>(await sbx(['show', id, '--json']));
    expect(view.operations).toBeGreaterThanOrEqual(11);

    // rm, twice (idempotent); then exec is E_CONFLICT.
    const removed = await sbx(['rm', id]);
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stdout).toContain(`${id}  DESTROYED`);
    expect((await sbx(['rm', id, '--json'])).code).toBe(0);
    const late = await sbx(['exec', id, '--json', '--', 'true']);
    expect(late.code).toBe(1);
    expect(json(late)).toMatchObject({ ok: false, error: { code: 'E_CONFLICT' } });

    // The chain: every operation a receipt, sealed, verifiable offline and as a bundle; nothing left running.
    const types = await receiptTypes(id);
    expect(types[0]).toBe('sandbox.requested');
    expect(types.at(-1)).toBe('run.sealed');
    expect(types).toContain('sandbox.created');
    expect(types).toContain('sandbox.destroyed');
    expect(types.filter((t) => t === 'sandbox.file.written').length).toBe(3);
    expect(types.filter((t) => t === 'sandbox.exec.completed').length).toBeGreaterThanOrEqual(8);
    expect(types.filter((t) => t === 'sandbox.file.read').length).toBeGreaterThanOrEqual(2);
    await stack.expectCleanAndVerifiable(id);
  }, 240_000);
});

describe('cairn sandbox exec: output streams live', () => {
  it('the CLI writes each output line as it arrives (a gateway double that holds the rest back 1.5 s)', async () => {
    const summary = { execId: 'x1', exitCode: 4, stdoutBytes: 12, stderrBytes: 0, stdoutSha256: 'a'.repeat(64), stderrSha256: 'b'.repeat(64), truncated: false, durationMs: 1500, limitHit: null, errorCode: null, seq: 9, sandboxState: 'READY' };
    const line = (value: unknown) => `${JSON.stringify(value)}\n`;
    let accept = '';
    const double = createServer((request, response) => {
      accept = request.headers.accept ?? '';
      request.resume();
      response.writeHead(200, { 'content-type': 'application/x-ndjson' });
      response.write(line({ type: 'output', stream: 'stdout', data: Buffer.from('first\n').toString('base64') }));
      setTimeout(() => {
        response.write(line({ type: 'output', stream: 'stdout', data: Buffer.from('second\n').toString('base64') }));
        response.end(line({ type: 'result', ...summary }));
      }, 1_500);
    });
    await new Promise<void>((resolve) => double.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(double.address() as AddressInfo).port}`;
      const run = await sbx(['exec', 'sbx_double', '--', 'anything'], { CAIRN_URL: url, CAIRN_API_KEY: `cairn_abcdefgh_${'K'.repeat(43)}` });
      expect(accept).toBe('application/x-ndjson');
      expect(run.stdout).toBe('first\nsecond\n');
      expect(run.code).toBe(4);
      expect(run.ms - run.firstStdoutMs, `first output at ${run.firstStdoutMs.toFixed(0)} ms of ${run.ms.toFixed(0)} ms`).toBeGreaterThan(1_000);
    } finally {
      await new Promise((resolve) => double.close(resolve));
    }
  });

  it('through the stack: the first line is on stdout while the program still runs (NDJSON flushed as output arrives)', async () => {
    const id = await create();
    const live = await sbx(['exec', id, '--', 'sh', '-c', 'echo first; sleep 2; echo second']);
    expect(live.code).toBe(0);
    expect(live.stdout).toBe('first\nsecond\n');
    expect(live.ms - live.firstStdoutMs, `first output at ${live.firstStdoutMs.toFixed(0)} ms of ${live.ms.toFixed(0)} ms`).toBeGreaterThan(1_500);
    expect((await sbx(['rm', id])).code).toBe(0);
  }, 60_000);
});

describe('cairn sandbox: limits, tenancy and removal', () => {
  it('a program past its --timeout: the code is printed, the exit status is not 0, and the sandbox lives on (only the program was killed)', async () => {
    const id = await create();
    const hit = await sbx(['exec', id, '--timeout', '1', '--', 'sleep', '30']);
    expect(hit.code).not.toBe(0);
    expect(hit.stderr).toContain('E_TIMEOUT');
    expect(hit.ms).toBeLessThan(20_000);
    const shown = json<{ state: string; destroyReason: string | null }>(await sbx(['show', id, '--json']));
    expect(shown).toMatchObject({ state: 'READY', destroyReason: null });
    const next = await sbx(['exec', id, '--', 'echo', 'still here']);
    expect(next.code, next.stderr).toBe(0);
    expect(next.stdout).toBe('still here\n');
    expect((await sbx(['rm', id])).code).toBe(0);
    await stack.expectCleanAndVerifiable(id);
  }, 120_000);

  it("another tenant's key sees none of it (E_NOT_FOUND), and rm of several stops at nothing: the known are removed, the unknown named", async () => {
    const id = await create();
    const other = await stack.mintKey('globex-sbx', ['runs:read', 'runs:write']);
    const asOther = { CAIRN_URL: stack.url, CAIRN_API_KEY: other };
    for (const args of [['show', id], ['exec', id, '--', 'true'], ['cp', `${id}:/work/x`, '-'], ['rm', id]]) {
      const end = args.indexOf('--');
      const refused = await sbx(end === -1 ? [...args, '--json'] : [...args.slice(0, end), '--json', ...args.slice(end)], asOther);
      expect(refused.code, args.join(' ')).toBe(1);
      expect(json(refused), args.join(' ')).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    }
    expect(json<{ items: { id: string }[] }>(await sbx(['ls', '--json'], asOther)).items).toEqual([]);

    const unknown = 'sbx_00000000000000000000000000';
    const mixed = await sbx(['rm', unknown, id, '--json']);
    expect(mixed.code).toBe(1);
    expect(json(mixed)).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND', details: { destroyed: [id], failed: [{ sandboxId: unknown, code: 'E_NOT_FOUND' }] } } });
    expect(json<{ state: string }>(await sbx(['show', id, '--json'])).state).toBe('DESTROYED');
    const verified = await stack.cairn(['verify', id, '--json']);
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
    expect(json(verified)).toMatchObject({ ok: true, chainId: id });
    // Its receipts, as for a run: a page, and followed to the seal (it is sealed, so the follow ends).
    const events = await stack.cairn(['events', id, '--json']);
    expect(events.code, events.stderr).toBe(0);
    const receipts = events.stdout.trim().split('\n').map((l) => JSON.parse(l) as { seq: number; type: string; run_id: string });
    expect(receipts.map((r) => r.seq)).toEqual(receipts.map((_, i) => i + 1));
    expect(receipts.every((r) => r.run_id === id)).toBe(true);
    expect([receipts[0]?.type, receipts.at(-1)?.type]).toEqual(['sandbox.requested', 'run.sealed']);
    const followed = await stack.cairn(['events', id, '--follow']);
    expect(followed.code, followed.stderr).toBe(0);
    expect(followed.stdout.trim().split('\n')).toHaveLength(receipts.length);
    // The export the user would keep, written where they ask.
    const exported = join(stack.home, `${id}.jsonl`);
    expect((await stack.cairn(['export', id, '-o', exported])).code).toBe(0);
    expect((await stat(exported)).size).toBeGreaterThan(0);
  }, 120_000);
});
