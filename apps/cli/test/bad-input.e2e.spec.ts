import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAIRN_BIN, runCairn } from './cli.harness.js';
import type { CliRun } from './cli.harness.js';

/*
 * The bad-input suite for the CLI: `cairn run` with a spec that is wrong in every way the REST
 * suite (apps/gateway/test/bad-input.e2e.spec.ts) tries, in YAML and in JSON, and the other
 * commands with look-alike or control characters in ids and keys. Each must exit 2 printing
 * E_INPUT and the field — and send nothing: the CLI is pointed (CAIRN_URL) at a recording server
 * under a path of its own, and that path must see no request. A valid spec sent the same way does
 * arrive there, so the recorder is known to hear.
 */

const CYRILLIC_A = '\u0430';
const KEY = `cairn_abcdefgh_${'K'.repeat(43)}`;
const VALID_YAML = 'name: fine\nsteps:\n  - argv: [echo, hello]\n';

let dir: string;
let recorder: Server;
let recorderUrl: string;
const requests: { method: string; url: string }[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-cli-bad-input-'));
  recorder = createServer((request, response) => {
    requests.push({ method: request.method ?? '', url: request.url ?? '' });
    request.resume();
    response.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'E_UNAVAILABLE', message: 'the recorder answers nothing' }));
  });
  await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
  recorderUrl = `http://127.0.0.1:${(recorder.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => recorder?.close(() => resolve()));
  await rm(dir, { recursive: true, force: true });
});

let cases = 0;

/** Runs the CLI against the recorder under a path of its own; returns the run and what reached that path. */
async function cairn(args: string[]): Promise<{ cli: CliRun; sent: { method: string; url: string }[] }> {
  const prefix = `/case-${(cases += 1)}`;
  const cli = await runCairn(args, { CAIRN_URL: `${recorderUrl}${prefix}`, CAIRN_API_KEY: KEY, CAIRN_HOME: join(dir, 'home') });
  return { cli, sent: requests.filter((r) => r.url.startsWith(`${prefix}/`)) };
}

async function specFile(name: string, content: string | Buffer): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, content);
  return path;
}

/** Exit 2, one JSON error E_INPUT naming `mentions`, and nothing sent. */
async function expectInputError(args: string[], mentions: string | RegExp): Promise<void> {
  // Before a `--` (what follows it is a program's argv, not the CLI's options).
  const end = args.indexOf('--');
  const { cli, sent } = await cairn(end === -1 ? [...args, '--json'] : [...args.slice(0, end), '--json', ...args.slice(end)]);
  expect(cli.code, cli.stdout + cli.stderr).toBe(2);
  const printed = JSON.parse(cli.stdout) as { ok: boolean; error: { code: string; message: string } };
  expect(printed).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
  if (typeof mentions === 'string') expect(printed.error.message).toContain(mentions);
  else expect(printed.error.message).toMatch(mentions);
  expect(sent).toEqual([]);
}

describe('the recorder hears what the CLI sends', () => {
  it('a valid spec is submitted to it (and its 503 is E_UNAVAILABLE, exit 1)', async () => {
    const { cli, sent } = await cairn(['run', await specFile('valid.yaml', VALID_YAML), '--json']);
    expect(cli.code, cli.stdout + cli.stderr).toBe(1);
    expect(JSON.parse(cli.stdout)).toMatchObject({ ok: false, error: { code: 'E_UNAVAILABLE' } });
    expect(sent.map((r) => `${r.method} ${r.url.replace(/^\/case-\d+/, '')}`)).toEqual(['POST /v1/runs']);
  });

  it('a spec whose file is binary, NUL bytes and all, base64-encoded, is submitted to it too', async () => {
    const content = Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x00, 0x00, 0x01]).toString('base64');
    const { cli, sent } = await cairn(['run', await specFile('binary.yaml', `${VALID_YAML}files:\n  - { path: /work/a.bin, encoding: base64, content: "${content}" }\n`), '--json']);
    expect(cli.code, cli.stdout + cli.stderr).toBe(1);
    expect(sent.map((r) => `${r.method} ${r.url.replace(/^\/case-\d+/, '')}`)).toEqual(['POST /v1/runs']);
  });
});

describe('cairn run <spec.yaml>: exit 2, E_INPUT naming the field, nothing sent', () => {
  it.concurrent.each([
    ['a shell string instead of argv', 'name: x\nsteps:\n  - argv: "rm -rf /"\n', 'steps[0].argv: argv must be an array of strings, not a shell string'],
    ['steps as one shell string', 'name: x\nsteps: "echo hi && rm -rf /"\n', 'steps:'],
    ['privileged', `${VALID_YAML}privileged: true\n`, 'privileged: unknown field'],
    ['a mount of the Docker socket', `${VALID_YAML}mounts:\n  - { source: /var/run/docker.sock, target: /var/run/docker.sock }\n`, 'mounts: unknown field'],
    ['network host', `${VALID_YAML}network: host\n`, 'network:'],
    ['capAdd', `${VALID_YAML}capAdd: [SYS_ADMIN]\n`, 'capAdd: unknown field'],
    ['devices', `${VALID_YAML}devices: [/dev/kvm]\n`, 'devices: unknown field'],
    ['user root', `${VALID_YAML}user: root\n`, 'user: unknown field'],
    ['workdir /proc/self/fd/3', 'name: x\nsteps:\n  - argv: [ls]\n    workdir: /proc/self/fd/3\n', 'steps[0].workdir:'],
    ['an input file at the Docker socket', `${VALID_YAML}files:\n  - { path: /var/run/docker.sock, content: x }\n`, 'files[0].path:'],
    ['a NUL byte in argv', 'name: x\nsteps:\n  - argv: [sh, "-c\\0rm -rf /work"]\n', 'steps[0].argv[1]:'],
    ['a NUL byte in claim.statement', `${VALID_YAML}claim:\n  statement: "holds\\0"\n  checks:\n    - { id: exit, source: "steps[0].exit_code", op: eq, value: 0 }\n`, 'claim.statement: a statement may not contain NUL (U+0000)'],
    ['a NUL byte in a utf8 file', `${VALID_YAML}files:\n  - { path: /work/a.bin, content: "ELF\\0" }\n`, 'files[0].content: file content may not contain NUL (U+0000); send a binary file base64-encoded'],
    ['a NUL byte in a check value', `${VALID_YAML}checks:\n  - { id: out, source: "steps[0].stdout", op: contains, value: "hello\\0", weight: 1 }\n`, 'checks[0].value: a check value may not contain NUL'],
    ['a NUL byte in an environment value', 'name: x\nsteps:\n  - argv: [env]\n    env: { A: "x\\0y" }\n', 'steps[0].env.A: an environment value may not contain NUL'],
    ['a NUL byte in the name', 'name: "a\\0b"\nsteps:\n  - argv: [echo]\n', 'name: no control characters'],
    ['a BEL in the name', 'name: "ding\\a"\nsteps:\n  - argv: [echo]\n', 'name: no control characters'],
    ['a Cyrillic letter in the job name', `${VALID_YAML}job: n${CYRILLIC_A}ghtly\n`, 'job:'],
    ['a key given twice', 'name: a\nname: b\nsteps:\n  - argv: [echo]\n', 'Map keys must be unique'],
    ['an alias bomb', `a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n${VALID_YAML}`, 'Excessive alias count'],
    ['a tag the core schema does not know', 'name: !!js/function "function () {}"\nsteps:\n  - argv: [echo]\n', 'Unresolved tag'],
    ['two documents in one file (which one runs?)', `${VALID_YAML}---\n${VALID_YAML}`, 'Source contains multiple documents'],
    ['nesting 20 000 levels deep', `${VALID_YAML}x: ${'['.repeat(20_000)}${']'.repeat(20_000)}\n`, 'not valid YAML'],
  ])('%s', async (what, yaml, mentions) => {
    await expectInputError(['run', await specFile(`${what.replace(/\W+/g, '-')}.yaml`, yaml)], mentions);
  });
});

describe('cairn run <spec.json>: exit 2, E_INPUT naming the field, nothing sent', () => {
  it.concurrent.each([
    ['a key given twice', '{"name":"a","name":"b","steps":[{"argv":["echo"]}]}', 'name: duplicate key'],
    ['argv given twice in a step', '{"name":"a","steps":[{"argv":["true"],"argv":["rm","-rf","/work"]}]}', 'steps[0].argv: duplicate key'],
    ['a key spelt twice, once with an escape', '{"name":"a","n\\u0061me":"b","steps":[{"argv":["echo"]}]}', 'name: duplicate key'],
    ['nesting 10 000 levels deep', `{"name":"a","steps":[{"argv":["echo"]}],"x":${'['.repeat(10_000)}${']'.repeat(10_000)}}`, 'JSON nested deeper than 64 levels'],
    ['a NUL byte in argv', '{"name":"a","steps":[{"argv":["sh","-c\\u0000id"]}]}', 'steps[0].argv[1]:'],
    ['a NUL byte in claim.statement', '{"name":"a","steps":[{"argv":["true"]}],"claim":{"statement":"holds\\u0000","checks":[{"id":"exit","source":"steps[0].exit_code","op":"eq","value":0}]}}', 'claim.statement: a statement may not contain NUL'],
    ['a NUL byte in a utf8 file', '{"name":"a","steps":[{"argv":["true"]}],"files":[{"path":"/work/a","content":"a\\u0000b","encoding":"utf8"}]}', 'files[0].content: file content may not contain NUL'],
    ['a NUL byte in a claim check value', '{"name":"a","steps":[{"argv":["true"]}],"claim":{"checks":[{"id":"out","source":"steps[0].stdout","op":"not_contains","value":"\\u0000"}]}}', 'claim.checks[0].value: a check value may not contain NUL'],
    [
      'a NUL byte in a gate check value',
      '{"name":"a","steps":[{"argv":["true"]},{"name":"patch","argv":["true"]},{"argv":["true"]}],"outputs":["/out"],"gate":{"patchStep":"patch","patch":"/out/fix.diff","checks":[{"id":"same","before":"steps[0].stdout","after":"steps[2].stdout","op":"eq","value":"ok\\u0000"}]}}',
      'gate.checks[0].value: a check value may not contain NUL',
    ],
    ['a lone surrogate in claim.statement', '{"name":"a","steps":[{"argv":["true"]}],"claim":{"statement":"half \\ud83d","checks":[{"id":"exit","source":"steps[0].exit_code","op":"eq","value":0}]}}', 'claim.statement: a statement may not contain a lone surrogate'],
    ['a __proto__ member', '{"name":"a","steps":[{"argv":["echo"]}],"__proto__":{"privileged":true}}', '__proto__'],
    ['a shell string instead of a spec', '"echo hi && rm -rf /"', '(root)'],
    ['privileged on a step', '{"name":"a","steps":[{"argv":["id"],"privileged":true}]}', 'steps[0].privileged: unknown field'],
  ])('%s', async (what, json, mentions) => {
    await expectInputError(['run', await specFile(`${what.replace(/\W+/g, '-')}.json`, json)], mentions);
  });
});

describe('cairn run <file>: only a readable regular file of valid UTF-8, at most 1 MiB', () => {
  it('refuses a file over 1 MiB', async () => {
    await expectInputError(['run', await specFile('big.yaml', `${VALID_YAML}# ${'x'.repeat(1024 * 1024)}\n`)], 'is larger than 1048576 bytes');
  });

  it('refuses bytes that are not UTF-8, never decoding them loosely', async () => {
    const bytes = Buffer.concat([Buffer.from('name: "bad '), Buffer.from([0xff, 0xfe]), Buffer.from('"\nsteps:\n  - argv: [echo]\n')]);
    await expectInputError(['run', await specFile('latin.yaml', bytes)], 'is not valid UTF-8');
  });

  it('refuses a device that never ends (/dev/zero) without reading it', async () => {
    await expectInputError(['run', '/dev/zero'], '/dev/zero is not a regular file');
  });

  it('refuses a FIFO without blocking on it', async () => {
    const fifo = join(dir, 'spec.fifo.yaml');
    execFileSync('mkfifo', [fifo]);
    await expectInputError(['run', fifo], 'is not a regular file');
  });

  it('refuses a directory', async () => {
    await expectInputError(['run', dir], 'is not a regular file');
  });

  it('prints the code for people too (no --json): E_INPUT on stderr, exit 2', async () => {
    const { cli, sent } = await cairn(['run', await specFile('human.yaml', `${VALID_YAML}privileged: true\n`)]);
    expect(cli.code).toBe(2);
    expect(cli.stderr).toContain('E_INPUT');
    expect(cli.stderr).toContain('privileged: unknown field');
    expect(cli.stdout).toBe('');
    expect(sent).toEqual([]);
  });
});

describe('ids and keys on the command line: look-alike and control characters', () => {
  it.concurrent.each([
    ['an idempotency key with Cyrillic letters', ['run', '@valid', '--idempotency-key', `ключ-${CYRILLIC_A}`], '--idempotency-key'],
    ['an idempotency key with a control character', ['run', '@valid', '--idempotency-key', 'key\u001b[31m'], '--idempotency-key'],
    ['an idempotency key with a space', ['run', '@valid', '--idempotency-key', 'two words'], '--idempotency-key'],
    ['status of a look-alike run id', ['status', `run_${CYRILLIC_A}bc123`], 'run'],
    ['cancel of a look-alike run id', ['cancel', `run_${CYRILLIC_A}bc123`], 'run'],
    ['cancel of a fullwidth run id', ['cancel', '\uff52un_abc123'], 'run'],
    ['cancel of a run id with a newline', ['cancel', 'run_abc\nrun_def'], 'run'],
    ['events of a run id with an ANSI escape', ['events', 'run_abc\u001b[2J'], 'run'],
    ['export of a look-alike chain id', ['export', `run_${CYRILLIC_A}bc123`], 'chain'],
  ])('%s', async (_what, args, mentions) => {
    const valid = await specFile('valid-for-options.yaml', VALID_YAML);
    await expectInputError(
      args.map((arg) => (arg === '@valid' ? valid : arg)),
      new RegExp(mentions.replace(/[-[\]{}()*+?.,\\^$|#\s]/g, '\\$&'), 'i'),
    );
  });
});

describe('cairn sandbox …: exit 2, E_INPUT naming the field, nothing sent (no sandbox created, no exec run)', () => {
  it('the recorder hears a valid create (and its 503 is E_UNAVAILABLE, exit 1)', async () => {
    const { cli, sent } = await cairn(['sandbox', 'create', '--ttl', '60', '--json']);
    expect(cli.code, cli.stdout + cli.stderr).toBe(1);
    expect(JSON.parse(cli.stdout)).toMatchObject({ ok: false, error: { code: 'E_UNAVAILABLE' } });
    expect(sent.map((r) => `${r.method} ${r.url.replace(/^\/case-\d+/, '')}`)).toEqual(['POST /v1/sandboxes']);
  });

  it.concurrent.each([
    ['create: an image reference with a shell in it', ['sandbox', 'create', '--image', 'busybox; rm -rf /'], 'image'],
    ['create: an upper-case image', ['sandbox', 'create', '--image', 'Cairn/Sandbox:1'], 'image'],
    ['create: a TTL of 0', ['sandbox', 'create', '--ttl', '0'], '--ttl'],
    ['create: a TTL over a day', ['sandbox', 'create', '--ttl', '86401'], '--ttl'],
    ['create: an idle limit with a unit', ['sandbox', 'create', '--idle', '10s'], '--idle'],
    ['create: memory with a unit', ['sandbox', 'create', '--memory', '64MiB'], '--memory'],
    ['create: no CPU at all', ['sandbox', 'create', '--cpus', '0'], '--cpus'],
    ['create: a secret name in lower case', ['sandbox', 'create', '--secret', 'api_token'], '--secret'],
    ['create: an idempotency key with a control character', ['sandbox', 'create', '--idempotency-key', 'k\u001b[2J'], '--idempotency-key'],
    ['exec: a look-alike sandbox id', ['sandbox', 'exec', `sbx_${CYRILLIC_A}bc`, '--', 'ls'], 'sandbox id'],
    ['exec: a run id for a sandbox id', ['sandbox', 'exec', 'run_abc', '--', 'ls'], 'sandbox id'],
    ['exec: no program', ['sandbox', 'exec', 'sbx_abc'], 'argv'],
    ['exec: an empty program', ['sandbox', 'exec', 'sbx_abc', '--', ''], 'argv[0]'],
    ['exec: a workdir outside /work, /out, /tmp', ['sandbox', 'exec', 'sbx_abc', '--workdir', '/proc/self/fd/3', '--', 'ls'], 'workdir'],
    ['exec: a workdir climbing out with ..', ['sandbox', 'exec', 'sbx_abc', '--workdir', '/work/../etc', '--', 'ls'], 'workdir'],
    ['exec: an env name in lower case', ['sandbox', 'exec', 'sbx_abc', '--env', 'path=/x', '--', 'ls'], '--env'],
    ['exec: an env pair without =', ['sandbox', 'exec', 'sbx_abc', '--env', 'PATH', '--', 'ls'], '--env'],
    ['exec: a timeout of 0', ['sandbox', 'exec', 'sbx_abc', '--timeout', '0', '--', 'ls'], '--timeout'],
    ['cp: no sandbox side', ['sandbox', 'cp', '/etc/hostname', '/tmp/elsewhere'], 'sandbox side'],
    ['cp: two sandboxes', ['sandbox', 'cp', 'sbx_abc:/work/a', 'sbx_def:/work/b'], 'one sandbox'],
    ['cp: into /etc', ['sandbox', 'cp', '/etc/hostname', 'sbx_abc:/etc/passwd'], 'invalid sandbox path'],
    ['cp: climbing out with ..', ['sandbox', 'cp', '/etc/hostname', 'sbx_abc:/work/../etc/shadow'], 'invalid sandbox path'],
    ['cp: a relative sandbox path', ['sandbox', 'cp', '/etc/hostname', 'sbx_abc:work/a'], 'invalid sandbox path'],
    ['cp: a directory as the sandbox file', ['sandbox', 'cp', 'sbx_abc:/work', '-'], 'invalid sandbox path'],
    ['cp: a control character in the sandbox path', ['sandbox', 'cp', '/etc/hostname', 'sbx_abc:/work/a\u001b[2Jb'], 'invalid sandbox path'],
    ['cp: setuid bits', ['sandbox', 'cp', '--mode', '4755', '/etc/hostname', 'sbx_abc:/work/a'], '--mode'],
    ['cp: /dev/zero (never ends)', ['sandbox', 'cp', '/dev/zero', 'sbx_abc:/work/zero'], 'not a regular file'],
    ['cp: a file that does not exist', ['sandbox', 'cp', '/nonexistent/file', 'sbx_abc:/work/a'], 'cannot read /nonexistent/file'],
    ['show: an id with a newline', ['sandbox', 'show', 'sbx_abc\nsbx_def'], 'sandbox id'],
    ['rm: one bad id among good ones (none is removed)', ['sandbox', 'rm', 'sbx_abc', `sbx_${CYRILLIC_A}bc`, 'sbx_def'], 'sandbox id'],
    ['ls: a state sandboxes do not have', ['sandbox', 'ls', '--state', 'SEALED'], '--state'],
  ])('%s', async (_what, args, mentions) => {
    await expectInputError(args, new RegExp(mentions.replace(/[-[\]{}()*+?.,\\^$|#\s]/g, '\\$&'), 'i'));
  });

  it('exec: stdin that is not UTF-8 text, or over 512 KiB, is refused before anything is sent', async () => {
    const withStdin = async (input: Buffer): Promise<{ code: number | null; stdout: string; sent: unknown[] }> => {
      const prefix = `/case-${(cases += 1)}`;
      const child = spawn(process.execPath, [CAIRN_BIN, 'sandbox', 'exec', 'sbx_abc', '--json', '--', 'cat'], {
        env: { PATH: process.env.PATH ?? '', NO_COLOR: '1', CAIRN_URL: `${recorderUrl}${prefix}`, CAIRN_API_KEY: KEY, CAIRN_HOME: join(dir, 'home') },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      const out: Buffer[] = [];
      child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
      child.stdin.on('error', () => undefined);
      child.stdin.end(input);
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      return { code, stdout: Buffer.concat(out).toString('utf8'), sent: requests.filter((r) => r.url.startsWith(`${prefix}/`)) };
    };
    const latin = await withStdin(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    expect(latin.code).toBe(2);
    expect(JSON.parse(latin.stdout)).toMatchObject({ ok: false, error: { code: 'E_INPUT', message: expect.stringContaining('not valid UTF-8') as string } });
    expect(latin.sent).toEqual([]);
    const big = await withStdin(Buffer.alloc(512 * 1024 + 1, 0x61));
    expect(big.code).toBe(2);
    expect(JSON.parse(big.stdout)).toMatchObject({ ok: false, error: { code: 'E_INPUT', message: expect.stringContaining('larger than 524288 bytes') as string } });
    expect(big.sent).toEqual([]);
  });

  it('cp: a FIFO is refused without blocking on it, and a file over 16 MiB without sending it', async () => {
    const fifo = join(dir, 'upload.fifo');
    execFileSync('mkfifo', [fifo]);
    await expectInputError(['sandbox', 'cp', fifo, 'sbx_abc:/work/a'], 'is not a regular file');
    const big = await specFile('big.bin', Buffer.alloc(16 * 1024 * 1024 + 1, 0x61));
    await expectInputError(['sandbox', 'cp', big, 'sbx_abc:/work/big.bin'], 'is larger than 16777216 bytes');
  });
});
