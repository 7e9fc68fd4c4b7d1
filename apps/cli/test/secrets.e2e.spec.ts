import { spawn, execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAIRN_BIN, runCairn } from './cli.harness.js';
import type { CliRun } from './cli.harness.js';
import { TestStack } from './stack.harness.js';
import type { RunView } from './stack.harness.js';

/*
 * Secrets end to end, through the CLI and REST on one isolated stack: set from stdin (never argv),
 * listed by their last four characters, mounted read-only at /run/secrets/NAME for a run that
 * lists them — and never in the container's configuration — and, when a run prints one (plain,
 * base64 on stderr, or hex in a collected file), redacted before hashing, the run ROLLBACK
 * E_SECRET_SEEN with a critical alert. Then the values are searched for, and found nowhere: not in
 * the exported chains, REST events or bundles, not in any column of any table of the stack's
 * database, not in any file under its CAIRN_HOME (service logs, artifacts, stack file).
 */

const run = promisify(execFile);
const SMALL = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };

let stack: TestStack;

/** A random value per secret: a search for it cannot be fooled by another test's. */
function freshValue(): string {
  return `v${randomBytes(27).toString('base64url')}`;
}
const VALUES = { TOKEN: freshValue(), LEAK_PLAIN: freshValue(), LEAK_B64: freshValue(), LEAK_FILE: freshValue() };
type SecretName = keyof typeof VALUES;

/** The built CLI with `input` on its stdin (how a value gets in: never an argument). */
function cairnWithStdin(args: readonly string[], input: string): Promise<CliRun> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CAIRN_BIN, ...args], { env: { PATH: process.env.PATH ?? '', NO_COLOR: '1', ...stack.env }, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), ms: performance.now() - started }));
    child.stdin.end(input);
  });
}

function spec(name: string, steps: unknown[], more: Record<string, unknown> = {}) {
  return { name, image: 'cairn/sandbox-busybox:1', steps, caps: SMALL, network: 'none', ...more };
}

async function submit(name: string, body: unknown): Promise<string> {
  const submitted = await stack.cairn(['run', await stack.specFile(name, body), '--json']);
  expect(submitted.code, submitted.stdout + submitted.stderr).toBe(0);
  return (JSON.parse(submitted.stdout) as { runId: string }).runId;
}

async function receipts(runId: string): Promise<Record<string, unknown>[]> {
  const response = await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: Record<string, unknown>[] }).items;
}

/** Every spelling of a value a search must not find: as is, base64 (both alphabets), hex. */
function spellings(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  return [value, bytes.toString('base64').replace(/=+$/, ''), bytes.toString('base64url'), bytes.toString('hex')];
}

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await filesUnder(path)));
    else if (entry.isFile()) out.push(path);
  }
  return out;
}

const runs: Record<string, Promise<string>> = {};
const inspected: string[] = [];

beforeAll(async () => {
  stack = await TestStack.create('secrets-e2e', { CAIRN_GRADER_TEARDOWN_GRACE_MS: '2000' });
  const up = await stack.up();
  expect(up.outcome).toBe('started');
  for (const [name, value] of Object.entries(VALUES)) {
    const set = await cairnWithStdin(['secrets', 'set', name, '--json'], `${value}\n`);
    expect(set.code, set.stdout + set.stderr).toBe(0);
  }

  runs.uses = submit('uses-a-secret', spec(
    'reads its secret from /run/secrets and never prints it',
    [
      // Time to look at the running sandbox from outside (docker inspect) once its secrets are in.
      { argv: ['sleep', '3'] },
      { argv: ['sh', '-c', 'sha256sum /run/secrets/TOKEN | cut -c1-64 > /out/digest'] },
      { argv: ['sh', '-c', 'cat /run/secrets/TOKEN > /work/copy && wc -c < /work/copy'] },
      {
        argv: [
          'sh',
          '-c',
          'if (echo x > /run/secrets/TOKEN) 2>/dev/null || (touch /run/secrets/NEW) 2>/dev/null || (chmod 666 /run/secrets/TOKEN) 2>/dev/null || (rm -f /run/secrets/TOKEN) 2>/dev/null; then echo writable; else echo read-only; fi',
        ],
      },
      { argv: ['sh', '-c', 'ls -ln /run/secrets; env; tr "\\000" "\\n" < /proc/1/environ; true'] },
    ],
    {
      secrets: ['TOKEN'],
      outputs: ['/out'],
      checks: [
        { id: 'digest', source: 'artifacts["/out/digest"]', op: 'contains', value: createHash('sha256').update(VALUES.TOKEN).digest('hex'), weight: 1 },
        { id: 'length', source: 'steps[2].stdout', op: 'contains', value: String(Buffer.byteLength(VALUES.TOKEN)), weight: 1 },
        { id: 'read-only', source: 'steps[3].stdout', op: 'contains', value: 'read-only', weight: 1 },
        { id: 'mode', source: 'steps[4].stdout', op: 'matches', value: '-r--r----- +1 +0 +65520 .*TOKEN', weight: 1 },
      ],
    },
  ));
  runs.plain = submit('prints-plain', spec('prints its secret', [{ argv: ['cat', '/run/secrets/LEAK_PLAIN'] }, { argv: ['echo', 'never'] }], { secrets: ['LEAK_PLAIN'] }));
  runs.base64 = submit('prints-base64', spec('prints its secret base64-encoded, on stderr', [{ argv: ['sh', '-c', 'echo before; base64 /run/secrets/LEAK_B64 1>&2'] }], { secrets: ['LEAK_B64'] }));
  runs.file = submit(
    'writes-a-file',
    spec('copies its secret into a collected file, and its hex into another', [{ argv: ['sh', '-c', 'cp /run/secrets/LEAK_FILE /out/leak.txt && xxd -p /run/secrets/LEAK_FILE > /out/leak.hex'] }], {
      secrets: ['LEAK_FILE'],
      outputs: ['/out'],
    }),
  );
  for (const pending of Object.values(runs)) pending.catch(() => undefined);

  // While the first run sleeps: its container, and every exec the engine recorded, as `docker inspect` shows them.
  const runId = await runs.uses;
  const deadline = Date.now() + 60_000;
  while (!(await stack.types(runId)).includes('step.started')) {
    if (Date.now() > deadline) throw new Error(`run ${runId} never started a step\n${await stack.logs()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const [container] = await stack.containers(runId);
  expect(container, 'the running sandbox').toBeDefined();
  const name = container!.split(',')[0]!.replace(/^\//, '');
  const { stdout } = await run('docker', ['inspect', name]).catch(async (error: unknown) => {
    throw new Error(`cannot inspect ${name}: ${String(error)}\n${JSON.stringify(await receipts(runId), null, 1)}\n${await stack.logs()}`);
  });
  inspected.push(stdout);
  // Execs still running are listed too (finished ones leave the record).
  const execIds = ((JSON.parse(stdout) as { ExecIDs: string[] | null }[])[0]?.ExecIDs ?? []).filter((id) => id.length > 0);
  for (const id of execIds) inspected.push((await run('docker', ['inspect', id]).catch(() => ({ stdout: '' }))).stdout);
});

afterAll(async () => {
  await stack?.dispose();
});

async function sealed(runId: string): Promise<RunView> {
  return stack.waitForRun(runId, (view) => view.sealed, 90_000);
}

describe('cairn secrets: set from stdin, listed by their last four characters', () => {
  it('made the key files under CAIRN_HOME (mode 0600) and gave the private key file to the workers only, never to the gateway', async () => {
    expect((await stat(join(stack.home, 'secrets.key'))).mode & 0o777).toBe(0o600);
    expect((await stat(join(stack.home, 'secrets-box.key'))).mode & 0o777).toBe(0o600);
    expect(await readFile(join(stack.home, 'secrets-box.pub'), 'utf8')).toMatch(/^x25519-public:[0-9a-f]{64}\n$/);
    // What each process was started with (/proc/<pid>/environ): the path of the private key, or not.
    const services = (await stack.stackFile()).services;
    const environ = async (service: string) => (await readFile(`/proc/${services[service]!.pid}/environ`, 'utf8')).split('\0');
    expect((await environ('gateway')).filter((v) => v.startsWith('CAIRN_SECRETS_'))).toEqual(
      expect.not.arrayContaining([expect.stringMatching(/^CAIRN_SECRETS_PRIVATE_KEY_FILE=/)]),
    );
    expect(await environ('gateway')).toContain(`CAIRN_SECRETS_PUBLIC_KEY_FILE=${join(stack.home, 'secrets-box.pub')}`);
    for (const worker of ['runtime', 'kernel', 'verifier', 'grader']) expect(await environ(worker)).toContain(`CAIRN_SECRETS_PRIVATE_KEY_FILE=${join(stack.home, 'secrets-box.key')}`);
    for (const other of ['policy', 'intake', 'projector']) expect((await environ(other)).some((v) => v.startsWith('CAIRN_SECRETS_PRIVATE_KEY_FILE='))).toBe(false);
  });

  it('refuses to start a stack whose key file others may read (E_INPUT naming its mode, exit 2, nothing started)', async () => {
    const home = await mkdtemp(join(tmpdir(), 'cairn-secrets-loose-'));
    try {
      await writeFile(join(home, 'secrets.key'), `${randomBytes(32).toString('hex')}\n`, { mode: 0o644 });
      await chmod(join(home, 'secrets.key'), 0o644);
      const env = { ...stack.env, CAIRN_HOME: home, CAIRN_STACK_ID: `${stack.stackId}-loose`.slice(0, 40) };
      const refused = await runCairn(['up', '--no-setup', '--json', '--timeout', '30'], env);
      expect(refused.code, refused.stdout + refused.stderr).toBe(2);
      const error = (JSON.parse(refused.stdout) as { error: { code: string; message: string } }).error;
      expect(error.code).toBe('E_INPUT');
      expect(error.message).toContain('mode 0644');
      expect(await readdir(home)).not.toContain('stack.json');
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });

  it('lists names and last four characters only; rm removes one', async () => {
    const listed = await stack.cairn(['secrets', 'ls', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const items = (JSON.parse(listed.stdout) as { items: { name: string; lastFour: string }[] }).items;
    expect(items.map((i) => [i.name, i.lastFour])).toEqual(
      (['LEAK_B64', 'LEAK_FILE', 'LEAK_PLAIN', 'TOKEN'] as SecretName[]).map((name) => [name, VALUES[name].slice(-4)]),
    );
    const human = await stack.cairn(['secrets', 'ls']);
    expect(human.stdout).toContain(`TOKEN`);
    for (const value of Object.values(VALUES)) expect(listed.stdout + human.stdout).not.toContain(value);

    const temporary = freshValue();
    expect((await cairnWithStdin(['secrets', 'set', 'TEMPORARY'], temporary)).code).toBe(0);
    const removed = await stack.cairn(['secrets', 'rm', 'TEMPORARY', '--json']);
    expect(JSON.parse(removed.stdout)).toEqual({ ok: true, name: 'TEMPORARY', deleted: true });
    const again = await stack.cairn(['secrets', 'rm', 'TEMPORARY', '--json']);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stdout)).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
  });

  it('refuses a bad name (exit 2) and empty stdin, and takes no value from argv', async () => {
    expect((await cairnWithStdin(['secrets', 'set', 'bad-name'], freshValue())).code).toBe(2);
    const empty = await cairnWithStdin(['secrets', 'set', 'EMPTY_ONE', '--json'], '');
    expect(empty.code).toBe(2);
    expect(JSON.parse(empty.stdout)).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
    expect((await stack.cairn(['secrets', 'set', 'ARGV_ONE', freshValue()])).code).toBe(2);
    const names = (JSON.parse((await stack.cairn(['secrets', 'ls', '--json'])).stdout) as { items: { name: string }[] }).items.map((i) => i.name);
    expect(names).not.toContain('ARGV_ONE');
    expect(names).not.toContain('EMPTY_ONE');
  });
});

describe('a run with secrets', () => {
  it('reads /run/secrets/NAME (root-owned, 0440, unchangeable) without printing it: SEALED, every check holds', async () => {
    const runId = await runs.uses!;
    const view = await sealed(runId);
    expect(view, await stack.logs()).toMatchObject({ state: 'SEALED', score: 4, maxScore: 4, errorCode: null });
    const kinds = (await receipts(runId)).map((r) => r.type);
    expect(kinds).not.toContain('secret.redacted');
    await stack.expectCleanAndVerifiable(runId);
  });

  it('is never in the container’s configuration: docker inspect of the running sandbox and its execs shows no value', () => {
    expect(inspected[0]).toContain('/run/secrets');
    for (const text of inspected) for (const spelling of spellings(VALUES.TOKEN)) expect(text).not.toContain(spelling);
  });

  it('a value edited in the catalog bucket fails the run closed, E_INTERNAL naming the secret, before any sandbox — it never runs without it', async () => {
    const set = await cairnWithStdin(['secrets', 'set', 'EDITED', '--json'], `${freshValue()}\n`);
    expect(set.code, set.stdout + set.stderr).toBe(0);
    await stack.tamperSecret('default.EDITED', (record) => {
      const sealed = Buffer.from(String(record.sealed), 'base64');
      sealed[sealed.length - 1] = sealed[sealed.length - 1]! ^ 0x01;
      return { ...record, sealed: sealed.toString('base64') };
    });
    const runId = await submit('edited-secret', spec('lists an edited secret', [{ argv: ['echo', 'never'] }], { secrets: ['EDITED'] }));
    const view = await sealed(runId);
    expect(view.errorCode).toBe('E_INTERNAL');
    const chain = await receipts(runId);
    expect(chain.map((r) => r.type)).not.toContain('sandbox.created');
    expect(chain.map((r) => r.type)).not.toContain('step.started');
    expect(JSON.stringify(chain.find((r) => r.type === 'run.failed'))).toContain('EDITED');
  });

  it('naming a secret the tenant lacks is REJECTED E_POLICY_DENIED, naming it', async () => {
    const runId = await submit('unknown-secret', spec('asks for a secret nobody set', [{ argv: ['echo', 'never'] }], { secrets: ['TOKEN', 'NOT_IN_STORE'] }));
    expect(await sealed(runId)).toMatchObject({ state: 'REJECTED', errorCode: 'E_POLICY_DENIED' });
    const decided = (await receipts(runId)).find((r) => r.type === 'policy.decided') as { reasons: string[] } | undefined;
    expect(decided?.reasons).toEqual(['secrets: NOT_IN_STORE is not in the secret store']);
  });

  it('a RunSpec holding a literal key is refused E_INPUT naming the field and the secret store (exit 2, no run)', async () => {
    const before = ((await (await stack.api('/v1/runs?limit=200')).json()) as { items: unknown[] }).items.length;
    const path = await stack.specFile('literal-key', spec('holds a literal key', [{ argv: ['aws', 's3', 'ls'], env: { AWS_ACCESS_KEY_ID: ['AKIA', 'IOSFODNN7EXAMPLE'].join('') } }]));
    const refused = await stack.cairn(['run', path, '--json']);
    expect(refused.code).toBe(2);
    const error = (JSON.parse(refused.stdout) as { error: { code: string; message: string } }).error;
    expect(error.code).toBe('E_INPUT');
    expect(error.message).toContain('steps[0].env.AWS_ACCESS_KEY_ID');
    expect(error.message).toContain('secret store');
    expect(error.message).not.toContain('IOSFODNN7EXAMPLE');
    expect(((await (await stack.api('/v1/runs?limit=200')).json()) as { items: unknown[] }).items.length).toBe(before);
  });
});

describe('a run that prints its secret: redacted before hashing, ROLLBACK E_SECRET_SEEN', () => {
  async function expectCaught(key: 'plain' | 'base64' | 'file', secret: SecretName, pattern: string, where: string): Promise<Record<string, unknown>[]> {
    const runId = await runs[key]!;
    const view = await sealed(runId);
    expect(view, await stack.logs()).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_SECRET_SEEN' });
    const chain = await receipts(runId);
    const redacted = chain.filter((r) => r.type === 'secret.redacted');
    expect(redacted.length).toBeGreaterThan(0);
    expect(redacted).toContainEqual(expect.objectContaining({ where, pattern, secret, count: 1 }));
    expect(chain.find((r) => r.type === 'alert.raised')).toMatchObject({ severity: 'critical', error_code: 'E_SECRET_SEEN' });
    expect(chain.find((r) => r.type === 'run.failed')).toMatchObject({ error_code: 'E_SECRET_SEEN' });
    expect(chain.at(-1)).toMatchObject({ type: 'run.sealed', final_state: 'ROLLBACK', error_code: 'E_SECRET_SEEN' });
    await stack.expectCleanAndVerifiable(runId);
    return chain;
  }

  /** The bytes the artifact store keeps for a hash. */
  const artifact = async (sha256: string) => (await stack.storedArtifact(sha256))?.toString('utf8');

  it('printed plain on stdout: the stored stdout holds the marker, the step says what was redacted, nothing runs after it', async () => {
    const chain = await expectCaught('plain', 'LEAK_PLAIN', 'secret.plain', 'stdout');
    const step = chain.find((r) => r.type === 'step.completed') as { error_code: string; redactions: unknown[]; stdout_sha256: string };
    expect(step.error_code).toBe('E_SECRET_SEEN');
    expect(step.redactions).toEqual([{ stream: 'stdout', pattern: 'secret.plain', secret: 'LEAK_PLAIN', count: 1 }]);
    expect(await artifact(step.stdout_sha256)).toBe('[REDACTED:LEAK_PLAIN]');
    expect(chain.filter((r) => r.type === 'step.started')).toHaveLength(1);
  });

  it('printed base64 on stderr: found as base64 and redacted there', async () => {
    const chain = await expectCaught('base64', 'LEAK_B64', 'secret.base64', 'stderr');
    const step = chain.find((r) => r.type === 'step.completed') as { stderr_sha256: string; stdout_sha256: string };
    expect(await artifact(step.stderr_sha256)).toContain('[REDACTED:LEAK_B64]');
    expect(await artifact(step.stdout_sha256)).toBe('before\n');
  });

  it('copied into collected files (as is, and as wrapped hex): both redacted before they are stored', async () => {
    const chain = await expectCaught('file', 'LEAK_FILE', 'secret.plain', 'file');
    const redacted = chain.filter((r) => r.type === 'secret.redacted');
    expect(redacted).toContainEqual(expect.objectContaining({ where: 'file', path: '/out/leak.txt', pattern: 'secret.plain', secret: 'LEAK_FILE' }));
    expect(redacted).toContainEqual(expect.objectContaining({ where: 'file', path: '/out/leak.hex', pattern: 'secret.hex', secret: 'LEAK_FILE' }));
  });

  it('logs the alert at level fatal, naming the secret and never its value', async () => {
    await Promise.all([runs.plain, runs.base64, runs.file].map(async (pending) => sealed(await pending!)));
    const log = await readFile(join(stack.home, 'logs', 'runtime.log'), 'utf8');
    const fatal = log.split('\n').filter((line) => line.includes('"level":"fatal"') && line.includes('E_SECRET_SEEN'));
    expect(fatal.length).toBeGreaterThanOrEqual(3);
    expect(fatal.join('\n')).toContain('LEAK_PLAIN');
  });

  it('and no value — printed or not — appears anywhere: chains, REST, every table, the catalog bucket, every file under CAIRN_HOME', async () => {
    const runIds = await Promise.all(Object.values(runs));
    for (const runId of runIds) await sealed(runId);
    const haystacks: [string, Buffer][] = [];
    for (const runId of runIds) {
      const file = join(stack.home, `${runId}.export.jsonl`);
      const exported = await stack.cairn(['export', runId, '-o', file]);
      expect(exported.code, exported.stderr).toBe(0);
      haystacks.push([`REST events of ${runId}`, Buffer.from(await (await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`)).text())]);
      haystacks.push([`bundle of ${runId}`, Buffer.from(await (await stack.api(`/v1/runs/${runId}/bundle`)).text())]);
    }
    // Every column of every table of the stack's database.
    const { stdout: dump } = await run('pg_dump', ['--no-owner', '--no-privileges', stack.database.url], { maxBuffer: 256 * 1024 * 1024 });
    haystacks.push(['pg_dump', Buffer.from(dump)]);
    // The secret catalog (ADR 0028): names and sealed values only — no longer in PostgreSQL at all.
    expect(dump).not.toMatch(/COPY public\.secrets [^\n]*\n[^\\]/);
    const catalog = await stack.secretRecords();
    expect(catalog).toContain('default.LEAK_PLAIN ');
    haystacks.push(['the secret catalog', Buffer.from(catalog)]);
    // Every file the stack wrote: logs, stack file, keys — and the chain files just exported.
    const files = await filesUnder(stack.home);
    expect(files.some((f) => f.endsWith('runtime.log'))).toBe(true);
    for (const file of files) haystacks.push([file, await readFile(file)]);
    // Every artifact in the stack's object store.
    const stored = await stack.storedArtifacts();
    expect(stored.size).toBeGreaterThan(5);
    for (const [name, bytes] of stored) haystacks.push([`artifacts ${name}`, bytes]);
    expect(haystacks.length).toBeGreaterThan(20);

    // The search reaches what runs wrote: the digest the first run stored in /out is found.
    const digest = createHash('sha256').update(VALUES.TOKEN).digest('hex');
    expect(haystacks.some(([where, bytes]) => where.includes('artifacts') && bytes.includes(digest))).toBe(true);

    const found: string[] = [];
    for (const [name, value] of Object.entries(VALUES)) {
      for (const spelling of spellings(value)) {
        for (const [where, bytes] of haystacks) if (bytes.includes(spelling)) found.push(`${name} (${spelling === value ? 'plain' : 'encoded'}) in ${where}`);
      }
    }
    expect(found).toEqual([]);
  });
});

describe('cairn secrets rotate-key, where the private key is', () => {
  it('re-seals every value to a fresh key; the running workers open them without a restart; reseal then has nothing left', async () => {
    const before = ((JSON.parse((await stack.cairn(['secrets', 'ls', '--json'])).stdout) as { items: { name: string; keyId: string }[] }).items);
    const rotated = await stack.cairn(['secrets', 'rotate-key', '--json']);
    expect(rotated.code, rotated.stdout + rotated.stderr).toBe(0);
    const outcome = JSON.parse(rotated.stdout) as { previous: string; current: string; keys: number; resealed: number; unreadable: string[] };
    expect(outcome.previous).toBe(before[0]!.keyId);
    expect(outcome.current).not.toBe(outcome.previous);
    expect(outcome.keys).toBe(2);
    // Every value but the one edited in the bucket (which no key opens) now names the new key.
    expect(outcome.unreadable).toEqual(['default/EDITED']);
    expect(outcome.resealed).toBe(before.length - 1);
    expect(await readFile(join(stack.home, 'secrets-box.pub'), 'utf8')).toMatch(new RegExp(`^x25519-public:[0-9a-f]{64}\\n`));
    const after = (JSON.parse((await stack.cairn(['secrets', 'ls', '--json'])).stdout) as { items: { name: string; keyId: string }[] }).items;
    expect(after.filter((s) => s.name !== 'EDITED').every((s) => s.keyId === outcome.current)).toBe(true);

    const runId = await submit('after-rotation', spec('reads its secret after a rotation', [{ argv: ['sh', '-c', 'sha256sum /run/secrets/TOKEN | cut -c1-64'] }], {
      secrets: ['TOKEN'],
      checks: [{ id: 'digest', source: 'steps[0].stdout', op: 'contains', value: createHash('sha256').update(VALUES.TOKEN).digest('hex'), weight: 1 }],
    }));
    expect(await sealed(runId), await stack.logs()).toMatchObject({ state: 'SEALED', score: 1, maxScore: 1, errorCode: null });

    const again = await stack.cairn(['secrets', 'reseal', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ keyId: outcome.current, resealed: 0, unreadable: ['default/EDITED'] });
  });
});
