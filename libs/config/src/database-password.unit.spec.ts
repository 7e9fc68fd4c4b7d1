import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isCairnError } from '@cairn/contracts';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DatabaseConfigSchema, loadConfig } from './load-config.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-db-password-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function passwordFile(text: string, mode = 0o600): Promise<string> {
  const path = join(dir, 'password');
  await writeFile(path, text, { mode });
  await chmod(path, mode);
  return path;
}

function refusal(env: Record<string, string>): { message: string; variables: unknown } {
  try {
    loadConfig(DatabaseConfigSchema, env);
  } catch (error) {
    if (isCairnError(error) && error.code === 'E_INPUT') return { message: error.message, variables: (error.details as { variables?: unknown } | undefined)?.variables };
    throw error;
  }
  throw new Error('accepted');
}

describe('CAIRN_DATABASE_PASSWORD_FILE', () => {
  it('puts the password of the file into the URL, in memory, once at load', async () => {
    const file = await passwordFile('s3cr/t:@x\n');
    const config = loadConfig(DatabaseConfigSchema, { CAIRN_DATABASE_URL: 'postgres://cairn_gateway@db:5432/cairn', CAIRN_DATABASE_PASSWORD_FILE: file });
    const url = new URL(config.CAIRN_DATABASE_URL);
    expect(url.username).toBe('cairn_gateway');
    expect(decodeURIComponent(url.password)).toBe('s3cr/t:@x');
    expect(url.host).toBe('db:5432');
  });

  it('leaves the URL alone when unset', () => {
    expect(loadConfig(DatabaseConfigSchema, { CAIRN_DATABASE_URL: 'postgres://a:b@h/d' }).CAIRN_DATABASE_URL).toBe('postgres://a:b@h/d');
  });

  it('refuses a file others may read, naming the variable and never the password', async () => {
    const file = await passwordFile('visible\n', 0o644);
    const { message, variables } = refusal({ CAIRN_DATABASE_URL: 'postgres://r@h/d', CAIRN_DATABASE_PASSWORD_FILE: file });
    expect(message).toContain('CAIRN_DATABASE_PASSWORD_FILE');
    expect(message).toContain('chmod 600');
    expect(message).not.toContain('visible');
    expect(variables).toEqual(['CAIRN_DATABASE_PASSWORD_FILE']);
  });

  it('refuses a missing file, an empty one and one of two lines', async () => {
    expect(refusal({ CAIRN_DATABASE_URL: 'postgres://r@h/d', CAIRN_DATABASE_PASSWORD_FILE: join(dir, 'absent') }).message).toMatch(/CAIRN_DATABASE_PASSWORD_FILE: cannot read .*ENOENT/);
    expect(refusal({ CAIRN_DATABASE_URL: 'postgres://r@h/d', CAIRN_DATABASE_PASSWORD_FILE: await passwordFile('\n') }).message).toContain('one line');
    expect(refusal({ CAIRN_DATABASE_URL: 'postgres://r@h/d', CAIRN_DATABASE_PASSWORD_FILE: await passwordFile('one\ntwo\n') }).message).toContain('one line');
  });

  it('refuses a URL that carries a password of its own, or names no role', async () => {
    const file = await passwordFile('pw\n');
    const withOwn = refusal({ CAIRN_DATABASE_URL: 'postgres://r:other@h/d', CAIRN_DATABASE_PASSWORD_FILE: file });
    expect(withOwn.variables).toEqual(['CAIRN_DATABASE_URL']);
    expect(withOwn.message).not.toContain('other');
    expect(refusal({ CAIRN_DATABASE_URL: 'postgres://h/d', CAIRN_DATABASE_PASSWORD_FILE: file }).message).toContain('names no role');
  });
});
