import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isCairnError } from '@cairn/contracts';
import { Cairn } from '@cairn/sdk';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliRun } from './cli.harness.js';
import { TestStack } from './stack.harness.js';

/*
 * What a run printed and wrote, read back through every client — the CLI (`run --wait`, `logs`,
 * `artifacts`), REST, @cairn/sdk (strict: an answer off the contract fails the test) and MCP — each
 * returning the exact bytes the run produced; then a stored artifact tampered with in the store is
 * refused by all of them, never served. One isolated stack on the real engine, NATS and PostgreSQL.
 */

const SMALL = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const sha = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex');

const MARK = randomBytes(6).toString('hex');
const STDOUT0 = `hello stdout ${MARK}\n`;
const STDERR0 = `oops stderr ${MARK}\n`;
const STDOUT1 = `second step ${MARK}\n`;
const REPORT = `{"mark":"${MARK}","ok":true}`;
/** Not UTF-8: 0xff 0x00, then the mark. */
const BINARY = Buffer.concat([Buffer.from([0xff, 0x00]), Buffer.from(MARK)]);

const SPEC = {
  name: 'outputs e2e',
  image: 'cairn/sandbox-busybox:1',
  steps: [
    { name: 'write', argv: ['sh', '-c', `printf '%s\\n' "hello stdout $1"; printf '%s\\n' "oops stderr $1" >&2; printf '%s' "$2" > /out/report.txt; printf '\\377\\000%s' "$1" > /out/data.bin`, 'sh', MARK, REPORT] },
    { argv: ['echo', `second step ${MARK}`] },
  ],
  outputs: ['/out'],
  caps: SMALL,
  network: 'none',
};

let stack: TestStack;
let mcpUrl: string;
let runId: string;
let waited: CliRun;
let scratch: string;

function sdk(apiKey = stack.apiKey): Cairn {
  return new Cairn({ url: stack.url, apiKey, validation: 'strict', retries: 0 });
}

async function mcp(): Promise<Client> {
  const client = new Client({ name: 'outputs-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { authorization: `Bearer ${stack.apiKey}` } } }));
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

async function restBytes(path: string): Promise<{ status: number; bytes: Buffer; sha256: string | null }> {
  const response = await stack.api(path);
  return { status: response.status, bytes: Buffer.from(await response.arrayBuffer()), sha256: response.headers.get('x-cairn-sha256') };
}

beforeAll(async () => {
  stack = await TestStack.create('outputs-e2e');
  const up = await stack.cairn(['up', '--no-setup', '--json', '--timeout', '90']);
  if (up.code !== 0) throw new Error(`cairn up failed (${up.code}):\n${up.stdout}\n${up.stderr}\n${await stack.logs()}`);
  const result = JSON.parse(up.stdout) as { url: string; apiKey: string; mcpUrl: string | null };
  stack.url = result.url;
  stack.apiKey = result.apiKey;
  mcpUrl = result.mcpUrl ?? '';
  scratch = await mkdtemp(join(tmpdir(), 'cairn-outputs-e2e-'));
  const specPath = await stack.specFile('outputs', SPEC);
  waited = await stack.cairn(['run', specPath, '--wait']);
  runId = /run_[a-z0-9_-]+/.exec(waited.stderr)?.[0] ?? '';
  if (waited.code !== 0 || runId === '') throw new Error(`cairn run --wait failed (${waited.code}):\n${waited.stdout}\n${waited.stderr}\n${await stack.logs()}`);
}, 240_000);

afterAll(async () => {
  if (scratch !== undefined) await rm(scratch, { recursive: true, force: true });
  await stack?.dispose();
}, 120_000);

describe('outputs, read back exactly', () => {
  it("cairn run --wait shows each step's stdout on stdout and stderr on stderr, as docker run does; --quiet silences them", async () => {
    expect(waited.stdout.startsWith(STDOUT0 + STDOUT1)).toBe(true);
    expect(waited.stderr).toContain(STDERR0);
    const quiet = await stack.cairn(['run', await stack.specFile('outputs-quiet', { ...SPEC, name: 'outputs quiet' }), '--wait', '--quiet']);
    expect(quiet.code).toBe(0);
    // (The progress lines still show each step's argv, on stderr.)
    for (const text of [STDOUT0, STDERR0, STDOUT1]) expect(quiet.stdout + quiet.stderr).not.toContain(text);
    expect(quiet.stdout).not.toContain(MARK);
  }, 120_000);

  it('cairn logs and cairn artifacts print the bytes as kept, to stdout or to a file', async () => {
    const logs = await stack.cairn(['logs', runId]);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toBe(STDOUT0 + STDOUT1);
    expect(logs.stderr).toBe(STDERR0);
    const one = await stack.cairn(['logs', runId, '--step', '0', '--stderr']);
    expect(one.stdout).toBe(STDERR0);
    const json = await stack.cairn(['logs', runId, '--step', '1', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, runId, steps: [{ index: 1, stdout: { encoding: 'utf8', content: STDOUT1, sha256: sha(STDOUT1) } }] });
    const noStep = await stack.cairn(['logs', runId, '--step', '9', '--json']);
    expect(noStep.code).toBe(1);

    const listed = await stack.cairn(['artifacts', runId, '--json']);
    expect(JSON.parse(listed.stdout)).toMatchObject({ ok: true, runId, items: expect.arrayContaining([{ path: '/out/report.txt', sha256: sha(REPORT), bytes: REPORT.length }, { path: '/out/data.bin', sha256: sha(BINARY), bytes: BINARY.length }]) as unknown });
    const printed = await stack.cairn(['artifacts', runId, '/out/report.txt']);
    expect(printed.stdout).toBe(REPORT);
    const target = join(scratch, 'data.bin');
    const saved = await stack.cairn(['artifacts', runId, 'out/data.bin', '-o', target]);
    expect(saved.code).toBe(0);
    expect(Buffer.compare(await readFile(target), BINARY)).toBe(0);
  }, 120_000);

  it('REST serves each stream and file with its sha256; another tenant sees none of it', async () => {
    const stdout = await restBytes(`/v1/runs/${runId}/steps/0/stdout`);
    expect(stdout).toMatchObject({ status: 200, sha256: sha(STDOUT0) });
    expect(stdout.bytes.toString('utf8')).toBe(STDOUT0);
    expect((await restBytes(`/v1/runs/${runId}/steps/0/stderr`)).bytes.toString('utf8')).toBe(STDERR0);
    const file = await restBytes(`/v1/runs/${runId}/artifacts/out/data.bin`);
    expect(file.status).toBe(200);
    expect(Buffer.compare(file.bytes, BINARY)).toBe(0);

    const other = await stack.mintKey('globex', ['runs:read']);
    for (const path of [`/v1/runs/${runId}/artifacts`, `/v1/runs/${runId}/steps/0/stdout`, `/v1/runs/${runId}/artifacts/out/report.txt`]) {
      const response = await fetch(`${stack.url}${path}`, { headers: { authorization: `Bearer ${other}` } });
      expect(response.status, path).toBe(404);
    }
  }, 60_000);

  it('@cairn/sdk, strict about the contract, reads every output and file exactly, and the run, its events and bundle agree with it', async () => {
    const cairn = sdk();
    const run = await cairn.runs.get(runId);
    expect(run).toMatchObject({ runId, state: 'SEALED', sealed: true });
    expect((await cairn.runs.list({ limit: 5 })).items.some((r) => r.runId === runId)).toBe(true);
    expect((await cairn.runs.events(runId, { limit: 1000 })).items.length).toBe(run.eventCount);
    expect((await cairn.runs.bundle(runId)).runId).toBe(runId);
    const outputs = await cairn.runs.outputs(runId);
    expect(outputs.steps.map((s) => [s.index, Buffer.from(s.stdout.bytes).toString('utf8'), Buffer.from(s.stderr.bytes).toString('utf8')])).toEqual([
      [0, STDOUT0, STDERR0],
      [1, STDOUT1, ''],
    ]);
    const files = Object.fromEntries(outputs.files.map((f) => [f.path, Buffer.from(f.bytes)]));
    expect(files['/out/report.txt']?.toString('utf8')).toBe(REPORT);
    expect(Buffer.compare(files['/out/data.bin'] ?? Buffer.alloc(0), BINARY)).toBe(0);
  }, 60_000);

  it('MCP run_outputs and run_artifact return the same bytes', async () => {
    const client = await mcp();
    try {
      const outputs = await call(client, 'run_outputs', { runId, step: 0 });
      expect(outputs.isError).toBeFalsy();
      expect(outputs.structuredContent).toMatchObject({ runId, steps: [{ index: 0, stdout: { encoding: 'utf8', content: STDOUT0 }, stderr: { encoding: 'utf8', content: STDERR0 } }] });
      const binary = await call(client, 'run_artifact', { runId, path: '/out/data.bin' });
      expect(binary.structuredContent).toMatchObject({ encoding: 'base64', content: BINARY.toString('base64'), sha256: sha(BINARY) });
    } finally {
      await client.close();
    }
  }, 60_000);
});

describe('where the bytes are', () => {
  it('in the stack\'s object store, named by sha256, and on no disk: every reader got them over NATS', async () => {
    for (const [bytes, name] of [[REPORT, 'report'], [BINARY, 'data'], [STDOUT0, 'stdout']] as const) {
      expect(Buffer.compare((await stack.storedArtifact(sha(bytes))) ?? Buffer.alloc(0), Buffer.from(bytes)), name).toBe(0);
    }
    // The directory older stacks wrote is not made, nor written: nothing on this host's disk served the reads above.
    await expect(readdir(join(stack.home, 'artifacts'))).rejects.toMatchObject({ code: 'ENOENT' });
    const files = await readdir(stack.home, { recursive: true });
    expect(files.filter((f) => f.includes('sha256'))).toEqual([]);
  });
});

describe('a tampered artifact', () => {
  it('is refused by REST (500 E_INTERNAL artifact_corrupt), the CLI, the SDK and MCP; nothing of it is served', async () => {
    const digest = sha(REPORT);
    expect((await stack.storedArtifact(digest))?.toString('utf8')).toBe(REPORT);
    const forged = REPORT.replace('true', 'fals');
    await stack.tamperArtifact(digest, new TextEncoder().encode(forged));

    const rest = await stack.api(`/v1/runs/${runId}/artifacts/out/report.txt`);
    expect(rest.status).toBe(500);
    const body = await rest.text();
    expect(JSON.parse(body)).toMatchObject({ code: 'E_INTERNAL', details: { reason: 'artifact_corrupt' } });
    expect(body).not.toContain('fals');

    const cli = await stack.cairn(['artifacts', runId, '/out/report.txt']);
    expect(cli.code).toBe(1);
    expect(cli.stdout).not.toContain('fals');
    expect(cli.stderr).toContain('E_INTERNAL');
    const target = join(scratch, 'report.txt');
    expect((await stack.cairn(['artifacts', runId, '/out/report.txt', '-o', target])).code).toBe(1);
    await expect(readFile(target)).rejects.toMatchObject({ code: 'ENOENT' });

    await expect(sdk().runs.artifact(runId, '/out/report.txt')).rejects.toSatisfy((error) => isCairnError(error) && error.code === 'E_INTERNAL');

    const client = await mcp();
    try {
      const refused = await call(client, 'run_artifact', { runId, path: '/out/report.txt' });
      expect(refused).toMatchObject({ isError: true, structuredContent: { error: { code: 'E_INTERNAL' } } });
      expect(JSON.stringify(refused)).not.toContain('fals');
    } finally {
      await client.close();
    }
    // The untouched outputs are still served.
    expect((await restBytes(`/v1/runs/${runId}/steps/0/stdout`)).bytes.toString('utf8')).toBe(STDOUT0);
  }, 90_000);
});
