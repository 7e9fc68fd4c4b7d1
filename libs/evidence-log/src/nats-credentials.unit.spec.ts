import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isCairnError } from '@cairn/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureNatsSeedFile, natsPublicKeyOf, readNatsSeedFile } from './nats-credentials.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-nats-creds-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function refusal(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(isCairnError(error) && error.code).toBe('E_INPUT');
  return String(error);
}

describe('NATS credentials files', () => {
  it('makes a user seed once (mode 0600), then keeps it', async () => {
    const path = join(dir, 'grader.nk');
    const first = await ensureNatsSeedFile(path);
    expect(first.created).toBe(true);
    expect(first.publicKey).toMatch(/^U[A-Z2-7]{55}$/);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    const again = await ensureNatsSeedFile(path);
    expect(again).toEqual({ created: false, publicKey: first.publicKey });
    expect(await readNatsSeedFile(path)).toMatch(/^SU/);
    expect(await natsPublicKeyOf(path)).toBe(first.publicKey);
  });

  it('refuses a file others may read, naming it and never its content', async () => {
    const path = join(dir, 'open.nk');
    await ensureNatsSeedFile(path);
    const seed = (await readFile(path, 'utf8')).trim();
    await chmod(path, 0o644);
    const message = await refusal(readNatsSeedFile(path));
    expect(message).toContain('mode 0644');
    expect(message).not.toContain(seed);
  });

  it('refuses a missing file and one that holds no user seed', async () => {
    expect(await refusal(readNatsSeedFile(join(dir, 'absent.nk')))).toContain('cannot be read');
    const path = join(dir, 'password.nk');
    await writeFile(path, 'hunter2\n', { mode: 0o600 });
    const message = await refusal(readNatsSeedFile(path));
    expect(message).toContain('holds no nkey user seed');
    expect(message).not.toContain('hunter2');
  });
});
