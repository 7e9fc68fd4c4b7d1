import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAIRN_BIN } from './cli.harness.js';
import type { CliRun } from './cli.harness.js';
import { TestStack } from './stack.harness.js';
import type { RunView } from './stack.harness.js';
import type { ApiKeyScope } from '@cairn/contracts';

/*
 * Who may use a secret, end to end on one isolated stack (`cairn up`, the real engine, broker and
 * database): an operator key sets a secret and grants it to one CI key (`cairn secrets set --grant`);
 * only a key holding `secrets:use` *and* a grant gets it mounted — in a run or a sandbox session. A
 * key without the grant, a key with the grant but without `secrets:use`, another tenant, and a
 * stolen `runs:write` key trying every route get no value: policy refuses (REJECTED E_POLICY_DENIED,
 * naming the secret, no sandbox), a sandbox that mounts it takes operations from its creator only,
 * and a `runs:read` key can neither read a sandbox's files nor change it. `cairn secrets grant` and
 * `revoke` change who may, from the next run on.
 */

const SMALL = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const BUSYBOX = 'cairn/sandbox-busybox:1';
const TENANT_A = 'default';

let stack: TestStack;

interface Key {
  id: string;
  key: string;
}

/** The one place this suite mints keys: through the stack's POST /v1/keys, as an operator does. */
function mintKey(tenant: string, scopes: ApiKeyScope[]): Promise<Key> {
  return stack.mintScopedKey(tenant, scopes);
}

const keys: Record<'ops' | 'ci' | 'ciUngranted' | 'grantedNoUse' | 'stolen' | 'reader' | 'globexCi', Key> = {} as never;
const VALUE = `v${randomBytes(27).toString('base64url')}`;
const GLOBEX_VALUE = `g${randomBytes(27).toString('base64url')}`;
const digestOf = (value: string) => createHash('sha256').update(value).digest('hex');

/** The built CLI as `key`, with `input` on its stdin (how a value gets in: never an argument). */
function cairnAs(key: Key, args: readonly string[], input: string | null = null): Promise<CliRun> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CAIRN_BIN, ...args], {
      env: { PATH: process.env.PATH ?? '', NO_COLOR: '1', ...stack.env, CAIRN_API_KEY: key.key },
      stdio: [input === null ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), ms: performance.now() - started }));
    if (input !== null) child.stdin?.end(input);
  });
}

interface Answer {
  status: number;
  text: string;
  body: Record<string, unknown> | null;
}

/** A GET of what the projection holds, repeated while it is not there yet (the answer to a create comes from the chain first). */
async function projected(key: Key, path: string): Promise<Answer> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const answer = await rest(key, 'GET', path);
    if (answer.status !== 404 || Date.now() > deadline) return answer;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function rest(key: Key, method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${key.key}` };
  if (body !== undefined) headers['content-type'] = contentType;
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const response = await fetch(`${stack.url}${path}`, { method, headers, ...(payload === undefined ? {} : { body: payload }) });
  const text = await response.text();
  let parsed: Record<string, unknown> | null = null;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = null;
  }
  return { status: response.status, text, body: parsed };
}

/** A run that reads DEPLOY_TOKEN and proves it by its digest (never printing it). */
function readsTheToken(name: string) {
  return {
    name,
    image: BUSYBOX,
    caps: SMALL,
    network: 'none',
    secrets: ['DEPLOY_TOKEN'],
    outputs: ['/out'],
    steps: [{ argv: ['sh', '-c', 'sha256sum /run/secrets/DEPLOY_TOKEN | cut -c1-64 > /out/digest'] }],
    checks: [{ id: 'digest', source: 'artifacts["/out/digest"]', op: 'contains', value: digestOf(VALUE), weight: 1 }],
  };
}

async function submitAs(key: Key, spec: unknown): Promise<string> {
  const submitted = await cairnAs(key, ['run', await stack.specFile(`spec-${randomBytes(4).toString('hex')}`, spec), '--json']);
  expect(submitted.code, submitted.stdout + submitted.stderr).toBe(0);
  return (JSON.parse(submitted.stdout) as { runId: string }).runId;
}

/** A run's receipts, read with a key of its tenant. */
async function receipts(runId: string, as: Key = keys.ci): Promise<Record<string, unknown>[]> {
  const answer = await rest(as, 'GET', `/v1/runs/${runId}/events?after=0&limit=1000`);
  expect(answer.status).toBe(200);
  return answer.body?.items as Record<string, unknown>[];
}

/** Polls the run (with a key of its tenant) until it is sealed. */
async function sealed(runId: string, as: Key = keys.ci): Promise<RunView> {
  const deadline = Date.now() + 90_000;
  let last: Answer | null = null;
  while (Date.now() < deadline) {
    last = await rest(as, 'GET', `/v1/runs/${runId}`);
    if (last.status === 200 && (last.body as unknown as RunView).sealed) return last.body as unknown as RunView;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`run ${runId} was not sealed in time; last seen ${last?.text ?? 'nothing'}\n${await stack.logs()}`);
}

/** A refused run: REJECTED E_POLICY_DENIED with exactly `reasons`, and no sandbox ever made for it. */
async function expectRefused(runId: string, reasons: string[], as: Key = keys.ci): Promise<void> {
  expect(await sealed(runId, as)).toMatchObject({ state: 'REJECTED', errorCode: 'E_POLICY_DENIED' });
  const chain = await receipts(runId, as);
  expect(chain.find((r) => r.type === 'policy.decided')).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED', reasons });
  expect(chain.map((r) => r.type)).not.toContain('sandbox.created');
  expect(chain.map((r) => r.type)).not.toContain('run.scheduled');
  expect(await stack.containers(runId)).toEqual([]);
  expect(JSON.stringify(chain)).not.toContain(VALUE);
}

beforeAll(async () => {
  stack = await TestStack.create('secrets-gov');
  await stack.up();
  // Tenant A is the stack's own (`default`, whose admin key the harness reads with); B is globex.
  keys.ops = await mintKey(TENANT_A, ['secrets:write']);
  keys.ci = await mintKey(TENANT_A, ['runs:read', 'runs:write', 'secrets:use']);
  keys.ciUngranted = await mintKey(TENANT_A, ['runs:read', 'runs:write', 'secrets:use']);
  keys.grantedNoUse = await mintKey(TENANT_A, ['runs:read', 'runs:write']);
  keys.stolen = await mintKey(TENANT_A, ['runs:read', 'runs:write']);
  keys.reader = await mintKey(TENANT_A, ['runs:read']);
  keys.globexCi = await mintKey('globex', ['runs:read', 'runs:write', 'secrets:use', 'secrets:write']);

  const set = await cairnAs(keys.ops, ['secrets', 'set', 'DEPLOY_TOKEN', '--grant', `key:${keys.ci.id}`, '--grant', `key:${keys.grantedNoUse.id}`, '--json'], `${VALUE}\n`);
  expect(set.code, set.stdout + set.stderr).toBe(0);
  // Another tenant's secret of the same name: its own, with its own value.
  const theirs = await cairnAs(keys.globexCi, ['secrets', 'set', 'DEPLOY_TOKEN', '--json'], `${GLOBEX_VALUE}\n`);
  expect(theirs.code, theirs.stdout + theirs.stderr).toBe(0);
});

afterAll(async () => {
  await stack?.dispose();
});

describe('cairn secrets: who may use a secret', () => {
  it('ls shows who set it and whom it is granted to — never the value', async () => {
    const listed = await cairnAs(keys.ops, ['secrets', 'ls', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const [secret] = (JSON.parse(listed.stdout) as { items: { name: string; setBy: string; grants: { grantee: string; grantedBy: string }[] }[] }).items;
    expect(secret).toMatchObject({ name: 'DEPLOY_TOKEN', setBy: `key:${keys.ops.id}` });
    expect(secret!.grants.map((g) => g.grantee).sort()).toEqual([`key:${keys.ci.id}`, `key:${keys.grantedNoUse.id}`, `key:${keys.ops.id}`].sort());
    const human = await cairnAs(keys.ops, ['secrets', 'ls']);
    expect(human.stdout).toContain(`key:${keys.ci.id}`);
    expect(listed.stdout + human.stdout).not.toContain(VALUE);
  });

  it('set --grant refuses a grantee that is no key of the tenant (E_INPUT, nothing stored), and a malformed one before sending', async () => {
    const unknown = await cairnAs(keys.ops, ['secrets', 'set', 'NEVER_SET', '--grant', `key:${keys.globexCi.id}`, '--json'], `${VALUE}x\n`);
    expect(unknown.code).toBe(2);
    expect(JSON.parse(unknown.stdout)).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
    const malformed = await cairnAs(keys.ops, ['secrets', 'set', 'NEVER_SET', '--grant', 'everyone', '--json'], `${VALUE}x\n`);
    expect(malformed.code).toBe(2);
    const names = (JSON.parse((await cairnAs(keys.ops, ['secrets', 'ls', '--json'])).stdout) as { items: { name: string }[] }).items.map((i) => i.name);
    expect(names).not.toContain('NEVER_SET');
  });
});

describe('a run naming a secret', () => {
  it('by a key with secrets:use and the grant: the secret is mounted, the run SEALED', async () => {
    const runId = await submitAs(keys.ci, readsTheToken('granted'));
    expect(await sealed(runId), await stack.logs()).toMatchObject({ state: 'SEALED', score: 1, maxScore: 1 });
    const submitted = (await receipts(runId))[0];
    // The principal policy decided from is on the chain: the key's id and scopes, nothing secret.
    expect(submitted).toMatchObject({ type: 'run.submitted', submitted_by: `key:${keys.ci.id}`, principal: { key_id: keys.ci.id, scopes: ['runs:read', 'runs:write', 'secrets:use'] } });
    await stack.expectCleanAndVerifiable(runId);
  });

  it('by a key of the tenant without the grant: REJECTED E_POLICY_DENIED naming the secret and the key, no sandbox', async () => {
    const runId = await submitAs(keys.ciUngranted, readsTheToken('not granted'));
    await expectRefused(runId, [`secrets: DEPLOY_TOKEN is not granted to key ${keys.ciUngranted.id}`]);
  });

  it('by a key with the grant but without secrets:use: REJECTED, no sandbox', async () => {
    const runId = await submitAs(keys.grantedNoUse, readsTheToken('granted, cannot use'));
    await expectRefused(runId, [`secrets: DEPLOY_TOKEN cannot be used: key ${keys.grantedNoUse.id} lacks the secrets:use scope`]);
  });

  it("by another tenant: never tenant A's value — its run mounts its own tenant's secret of that name", async () => {
    const runId = await submitAs(keys.globexCi, { ...readsTheToken('globex'), checks: [{ id: 'digest', source: 'artifacts["/out/digest"]', op: 'contains', value: digestOf(GLOBEX_VALUE), weight: 1 }] });
    expect(await sealed(runId, keys.globexCi)).toMatchObject({ state: 'SEALED', score: 1, maxScore: 1 });
    // A name only tenant A has is not in tenant B's store at all; A's key cannot even see B's run.
    expect((await cairnAs(keys.ops, ['secrets', 'set', 'A_ONLY', '--grant', `key:${keys.ci.id}`], `${VALUE}-a-only\n`)).code).toBe(0);
    const other = await submitAs(keys.globexCi, { ...readsTheToken('globex, A only'), secrets: ['DEPLOY_TOKEN', 'A_ONLY'] });
    await expectRefused(other, ['secrets: A_ONLY is not in the secret store'], keys.globexCi);
    expect((await rest(keys.ci, 'GET', `/v1/runs/${other}`)).status).toBe(404);
  });

  it('grant and revoke take effect from the next run: granted, the key uses it; revoked, it is refused again', async () => {
    const granted = await cairnAs(keys.ops, ['secrets', 'grant', 'DEPLOY_TOKEN', `key:${keys.ciUngranted.id}`, '--json']);
    expect(granted.code, granted.stdout + granted.stderr).toBe(0);
    expect((JSON.parse(granted.stdout) as { grants: { grantee: string }[] }).grants.map((g) => g.grantee)).toContain(`key:${keys.ciUngranted.id}`);
    const allowed = await submitAs(keys.ciUngranted, readsTheToken('granted now'));
    expect(await sealed(allowed)).toMatchObject({ state: 'SEALED', score: 1 });

    const revoked = await cairnAs(keys.ops, ['secrets', 'revoke', 'DEPLOY_TOKEN', `key:${keys.ciUngranted.id}`, '--json']);
    expect(revoked.code, revoked.stdout + revoked.stderr).toBe(0);
    expect(JSON.parse(revoked.stdout)).toMatchObject({ ok: true, revoked: `key:${keys.ciUngranted.id}` });
    const refused = await submitAs(keys.ciUngranted, readsTheToken('revoked'));
    await expectRefused(refused, [`secrets: DEPLOY_TOKEN is not granted to key ${keys.ciUngranted.id}`]);
    // Revoking what is not there is E_NOT_FOUND (exit 1).
    const again = await cairnAs(keys.ops, ['secrets', 'revoke', 'DEPLOY_TOKEN', `key:${keys.ciUngranted.id}`, '--json']);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stdout)).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
  });

  it('a scope grant admits every key of the tenant holding that scope (and secrets:use)', async () => {
    const broad = await mintKey(TENANT_A, ['runs:write', 'approve', 'secrets:use']);
    expect((await cairnAs(keys.ops, ['secrets', 'grant', 'DEPLOY_TOKEN', 'scope:approve'])).code).toBe(0);
    try {
      expect(await sealed(await submitAs(broad, readsTheToken('by scope')))).toMatchObject({ state: 'SEALED', score: 1 });
    } finally {
      expect((await cairnAs(keys.ops, ['secrets', 'revoke', 'DEPLOY_TOKEN', 'scope:approve'])).code).toBe(0);
    }
  });
});

describe('a sandbox session naming a secret', () => {
  const SPEC = { image: BUSYBOX, caps: { memoryMiB: 64, pids: 64, diskMiB: 16, cpus: 0.5 }, ttlSeconds: 300, secrets: ['DEPLOY_TOKEN'] };
  let sandboxId = '';

  it('by a key without the grant is refused (403 E_POLICY_DENIED naming the secret), and its chain reads REJECTED with no sandbox', async () => {
    const refused = await rest(keys.ciUngranted, 'POST', '/v1/sandboxes', SPEC);
    expect([refused.status, refused.body?.code]).toEqual([403, 'E_POLICY_DENIED']);
    expect(refused.body?.message).toContain(`DEPLOY_TOKEN is not granted to key ${keys.ciUngranted.id}`);
    const id = (refused.body?.details as { sandboxId?: string } | undefined)?.sandboxId;
    expect(id).toMatch(/^sbx_/);
    const chain = await projected(keys.ciUngranted, `/v1/sandboxes/${id}/events?after=0&limit=100`);
    expect(chain.status, chain.text).toBe(200);
    expect((chain.body?.items as { type: string }[]).map((r) => r.type)).not.toContain('sandbox.created');
    expect(await stack.containers(id)).toEqual([]);
    expect(refused.text + chain.text).not.toContain(VALUE);
  });

  it('by a key with secrets:use and the grant mounts it; the creator may use the session', async () => {
    const created = await rest(keys.ci, 'POST', '/v1/sandboxes', SPEC);
    expect(created.status, created.text).toBe(201);
    sandboxId = String(created.body?.id);
    const digest = await rest(keys.ci, 'POST', `/v1/sandboxes/${sandboxId}/exec`, { argv: ['sh', '-c', 'sha256sum /run/secrets/DEPLOY_TOKEN | cut -c1-64'] });
    expect(digest.status, digest.text).toBe(200);
    expect(String(digest.body?.stdout).trim()).toBe(digestOf(VALUE));
    expect((await rest(keys.ci, 'PUT', `/v1/sandboxes/${sandboxId}/files?path=/work/note`, 'hello', 'application/octet-stream')).status).toBe(200);
    expect((await fetch(`${stack.url}/v1/sandboxes/${sandboxId}/files?path=/work/note`, { headers: { authorization: `Bearer ${keys.ci.key}` } })).status).toBe(200);
  });

  it('takes no operation from another runs:write key of the tenant (403 E_FORBIDDEN): `rev /run/secrets/…` gets it nothing', async () => {
    const attempts: [string, () => Promise<Answer>][] = [
      ['exec', () => rest(keys.stolen, 'POST', `/v1/sandboxes/${sandboxId}/exec`, { argv: ['rev', '/run/secrets/DEPLOY_TOKEN'] })],
      ['exec by another secrets:use key', () => rest(keys.ciUngranted, 'POST', `/v1/sandboxes/${sandboxId}/exec`, { argv: ['cat', '/run/secrets/DEPLOY_TOKEN'] })],
      ['read a file', () => rest(keys.stolen, 'GET', `/v1/sandboxes/${sandboxId}/files?path=/work/note`)],
      ['write a file', () => rest(keys.stolen, 'PUT', `/v1/sandboxes/${sandboxId}/files?path=/work/tool`, 'planted', 'application/octet-stream')],
    ];
    for (const [what, send] of attempts) {
      const answer = await send();
      expect([answer.status, answer.body?.code], what).toEqual([403, 'E_FORBIDDEN']);
      expect(answer.text, what).not.toContain(VALUE);
      expect(answer.text, what).not.toContain([...VALUE].reverse().join(''));
    }
    const types = ((await rest(keys.ci, 'GET', `/v1/sandboxes/${sandboxId}/events?after=0&limit=200`)).body?.items as { type: string; argv?: string[] }[]).map((r) => r.argv?.[0] ?? r.type);
    expect(types).not.toContain('rev');
  });

  it('and a runs:read key can neither read its files nor exec, write or delete (403 E_FORBIDDEN, runs:write)', async () => {
    const attempts: [string, () => Promise<Answer>][] = [
      ['read a file', () => rest(keys.reader, 'GET', `/v1/sandboxes/${sandboxId}/files?path=/work/note`)],
      ['exec', () => rest(keys.reader, 'POST', `/v1/sandboxes/${sandboxId}/exec`, { argv: ['true'] })],
      ['write a file', () => rest(keys.reader, 'PUT', `/v1/sandboxes/${sandboxId}/files?path=/work/x`, 'x', 'application/octet-stream')],
      ['delete', () => rest(keys.reader, 'DELETE', `/v1/sandboxes/${sandboxId}`)],
    ];
    for (const [what, send] of attempts) {
      const answer = await send();
      expect([answer.status, answer.body?.code, (answer.body?.details as { scope?: string } | undefined)?.scope], what).toEqual([403, 'E_FORBIDDEN', 'runs:write']);
    }
    expect((await rest(keys.reader, 'GET', `/v1/sandboxes/${sandboxId}`)).body).toMatchObject({ state: 'READY' });
    const destroyed = await rest(keys.ci, 'DELETE', `/v1/sandboxes/${sandboxId}`);
    expect(destroyed.body).toMatchObject({ state: 'DESTROYED' });
    await stack.expectCleanAndVerifiable(sandboxId);
  });
});

describe('a stolen runs:write key without secrets:use', () => {
  it('gets no secret value by any route: runs and sessions are refused, the store neither lists nor grants to it', async () => {
    const runId = await submitAs(keys.stolen, { ...readsTheToken('stolen'), steps: [{ argv: ['rev', '/run/secrets/DEPLOY_TOKEN'] }] });
    await expectRefused(runId, [`secrets: DEPLOY_TOKEN cannot be used: key ${keys.stolen.id} lacks the secrets:use scope`]);
    const answers: [string, Answer][] = [
      ['sandbox', await rest(keys.stolen, 'POST', '/v1/sandboxes', { image: BUSYBOX, secrets: ['DEPLOY_TOKEN'] })],
      ['list secrets', await rest(keys.stolen, 'GET', '/v1/secrets')],
      ['grant itself', await rest(keys.stolen, 'POST', '/v1/secrets/DEPLOY_TOKEN/grants', { grantees: [`key:${keys.stolen.id}`] })],
      ['replace it', await rest(keys.stolen, 'PUT', '/v1/secrets/DEPLOY_TOKEN', 'attacker-chosen-value', 'text/plain')],
    ];
    expect(answers.map(([what, a]) => [what, a.status, a.body?.code])).toEqual([
      ['sandbox', 403, 'E_POLICY_DENIED'],
      ['list secrets', 403, 'E_FORBIDDEN'],
      ['grant itself', 403, 'E_FORBIDDEN'],
      ['replace it', 403, 'E_FORBIDDEN'],
    ]);
    for (const [, answer] of answers) expect(answer.text).not.toContain(VALUE);
    // The run's chain and bundle, readable with the key, hold nothing of it either.
    const bundle = await rest(keys.stolen, 'GET', `/v1/runs/${runId}/bundle`);
    expect(bundle.status).toBe(200);
    for (const spelling of [VALUE, [...VALUE].reverse().join(''), Buffer.from(VALUE).toString('base64').replace(/=+$/, ''), Buffer.from(VALUE).toString('hex')]) {
      expect(bundle.text).not.toContain(spelling);
    }
  });
});
