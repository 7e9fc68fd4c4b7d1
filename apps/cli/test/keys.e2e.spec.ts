import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliRun } from './cli.harness.js';
import { TestStack } from './stack.harness.js';

/*
 * API keys and tenants end to end through the CLI and REST on one isolated stack (docs/adr/0011):
 * the operator (the key `cairn up` made) creates a tenant and its first admin key; that admin
 * creates a key, which works, is rotated (the old secret refused, the new one works) and revoked
 * (refused on the next request); bad input is E_INPUT, exit 2, and creates nothing; the admin chain
 * verifies with `cairn verify adm_<tenant>`, and a tampered copy does not. Last, the bootstrap key
 * itself is rotated: the CLI keeps the new one in $CAIRN_HOME/api-key, and the stack keeps working
 * across `cairn down` / `cairn up`, the old key refused for good.
 */

let stack: TestStack;
const tenant = uniqueName('acme').toLowerCase().replace(/[^a-z0-9_-]/g, '');

interface KeyJson {
  ok: boolean;
  id: string;
  key: string;
  prefix: string;
  status: string;
  scopes: string[];
  rotations: number;
}

function json<T>(run: CliRun): T {
  expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
  return JSON.parse(run.stdout) as T;
}

async function status(key: string): Promise<number> {
  return (await fetch(`${stack.url}/v1/runs?limit=1`, { headers: { authorization: `Bearer ${key}` } })).status;
}

async function waitFor<T>(what: string, probe: () => Promise<T | null>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

beforeAll(async () => {
  stack = await TestStack.create('keys-e2e');
  expect((await stack.up()).outcome).toBe('started');
}, 180_000);

afterAll(async () => {
  await stack?.dispose();
});

describe('cairn keys and cairn tenants', () => {
  let admin = '';

  it('lets the operator create a tenant and its first admin key; the secret is printed once', async () => {
    const created = await stack.cairn(['tenants', 'create', tenant]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toContain(`tenant ${tenant} created (admin chain adm_${tenant})`);
    expect(json<{ items: { id: string }[] }>(await stack.cairn(['tenants', 'ls', '--json'])).items.map((t) => t.id)).toEqual(expect.arrayContaining(['default', tenant]));
    expect((await stack.cairn(['tenants', 'create', tenant, '--json'])).stdout).toContain('E_CONFLICT');

    const human = await stack.cairn(['keys', 'create', '--tenant', tenant, '--scope', 'admin']);
    expect(human.code, human.stderr).toBe(0);
    const [first, secret] = human.stdout.trim().split('\n');
    expect(first).toMatch(new RegExp(`^OK  key \\S+ created \\(tenant ${tenant}, admin\\)$`));
    expect(secret).toMatch(/^cairn_[a-z2-7]{8}_[A-Za-z0-9_-]{43}$/);
    expect(human.stderr).toContain('shown once');
    admin = secret!;
    expect(await status(admin)).toBe(200);
    // Never again: not in a listing, human or --json.
    const asAdmin = { CAIRN_API_KEY: admin };
    for (const args of [['keys', 'ls'], ['keys', 'ls', '--json']]) expect((await stack.cairn(args, asAdmin)).stdout).not.toContain(admin.slice(15));
  });

  it('creates, uses, rotates (old refused, new works) and revokes (refused on the next request) a key', async () => {
    const asAdmin = { CAIRN_API_KEY: admin };
    const key = json<KeyJson>(await stack.cairn(['keys', 'create', '--scope', 'runs:read', '--expires', '30d', '--json'], asAdmin));
    expect(key).toMatchObject({ ok: true, status: 'active', scopes: ['runs:read'] });
    expect(await status(key.key)).toBe(200);

    const rotated = json<KeyJson>(await stack.cairn(['keys', 'rotate', key.id, '--json'], asAdmin));
    expect(rotated).toMatchObject({ id: key.id, prefix: key.prefix, rotations: 1 });
    expect(await status(key.key)).toBe(401);
    expect(await status(rotated.key)).toBe(200);

    const revoked = await stack.cairn(['keys', 'revoke', key.id, '--reason', 'done with it'], asAdmin);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toContain(`key ${key.id} revoked`);
    expect(await status(rotated.key)).toBe(401);

    const listed = await stack.cairn(['keys', 'ls'], asAdmin);
    expect(listed.stdout).toMatch(new RegExp(`${key.id}  cairn_${key.prefix}_…\\S{4}  revoked`));
    // Another tenant's admin cannot touch the operator's tenant, nor list tenants.
    expect((await stack.cairn(['tenants', 'ls', '--json'], asAdmin)).stdout).toContain('E_FORBIDDEN');
    expect((await stack.cairn(['keys', 'ls', '--tenant', 'default', '--json'], asAdmin)).stdout).toContain('E_FORBIDDEN');
  });

  it('refuses bad input with E_INPUT (exit 2) and creates nothing', async () => {
    const asAdmin = { CAIRN_API_KEY: admin };
    const before = json<{ items: unknown[] }>(await stack.cairn(['keys', 'ls', '--json'], asAdmin)).items.length;
    for (const args of [
      ['keys', 'create'],
      ['keys', 'create', '--scope', 'root'],
      ['keys', 'create', '--scope', 'runs:read', '--expires', 'yesterday'],
      ['keys', 'create', '--scope', 'runs:read', '--expires', '2020-01-01'],
      ['keys', 'create', '--scope', 'runs:read', '--tenant', 'Not Valid'],
      ['keys', 'rotate', 'bad id!'],
      ['keys', 'rotate', 'x', '--grace', '2h'],
      ['tenants', 'create', 'UPPER'],
    ]) {
      const run = await stack.cairn([...args, '--json'], asAdmin);
      expect(run.code, args.join(' ')).toBe(2);
      expect(JSON.parse(run.stdout)).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
    }
    expect(json<{ items: unknown[] }>(await stack.cairn(['keys', 'ls', '--json'], asAdmin)).items).toHaveLength(before);
  });

  it('verifies the admin chain with cairn verify adm_<tenant>; a tampered export fails', async () => {
    const chainId = `adm_${tenant}`;
    // Projected asynchronously: wait until the revocation is there.
    const events = await waitFor('the admin chain projected', async () => {
      const run = await stack.cairn(['events', chainId, '--json']);
      if (run.code !== 0) return null;
      const lines = run.stdout.trim().split('\n').map((line) => JSON.parse(line) as { type: string });
      return lines.some((r) => r.type === 'admin.key_revoked') ? lines : null;
    });
    expect(events.map((r) => r.type)).toEqual(['admin.tenant_created', 'admin.key_created', 'admin.key_created', 'admin.key_rotated', 'admin.key_revoked']);
    const verified = await stack.cairn(['verify', chainId]);
    expect(verified.code, verified.stderr).toBe(0);
    expect(verified.stdout).toMatch(new RegExp(`^OK  5 receipts  chain ${chainId}  head [0-9a-f]{64}`));

    const file = join(stack.home, `${chainId}.jsonl`);
    const exported = await stack.cairn(['export', chainId, '-o', file]);
    expect(exported.code, exported.stderr).toBe(0);
    expect((await stack.cairn(['verify', file])).code).toBe(0);
    const lines = (await readFile(file, 'utf8')).trimEnd().split('\n');
    const second = JSON.parse(lines[1]!) as Record<string, unknown>;
    lines[1] = JSON.stringify({ ...second, created_by: 'key:forged' });
    await writeFile(file, `${lines.join('\n')}\n`);
    const broken = await stack.cairn(['verify', file, '--json']);
    expect(broken.code).toBe(1);
    expect(JSON.parse(broken.stdout)).toMatchObject({ ok: false, error: { code: 'E_CHAIN_BROKEN', details: { firstBadSeq: 2 } } });
  });

  it('rotates the bootstrap key: the CLI keeps the new one in $CAIRN_HOME/api-key, and the stack keeps working across down and up', async () => {
    const keyFile = join(stack.home, 'api-key');
    const old = (await readFile(keyFile, 'utf8')).trim();
    const prefix = old.slice('cairn_'.length, 'cairn_'.length + 8);
    const own = json<{ items: { id: string; prefix: string }[] }>(await stack.cairn(['keys', 'ls', '--json'])).items.find((k) => k.prefix === prefix);
    expect(own).toBeDefined();

    const rotated = await stack.cairn(['keys', 'rotate', own!.id]);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stdout).toContain(`the new key replaced the old one in ${stack.home}/api-key`);
    const now = (await readFile(keyFile, 'utf8')).trim();
    expect(now).not.toBe(old);
    expect(rotated.stdout).toContain(now);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    expect(await status(old)).toBe(401);
    expect(await status(now)).toBe(200);
    expect((await stack.cairn(['tenants', 'ls'])).code).toBe(0);

    const down = await stack.cairn(['down', '--timeout', '10']);
    expect(down.code, down.stderr).toBe(0);
    const up = await stack.up();
    expect(up.apiKey).toBe(now);
    expect(await status(now)).toBe(200);
    // The gateway was handed the new key; the old one is never registered again.
    expect(await status(old)).toBe(401);
    expect((await stack.cairn(['keys', 'ls', '--json'])).code).toBe(0);
  }, 180_000);
});
