import { Readable } from 'node:stream';
import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { grantsColumn, parseGrantee, parseGrantList, parseSecretName, readSecretValue } from './secrets.command.js';

const text = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8');

describe('cairn secrets: reading a value', () => {
  it('reads piped stdin to its end, in chunks', async () => {
    const value = await readSecretValue(Readable.from([Buffer.from('first-'), Buffer.from('second\n')]), () => undefined);
    expect(text(value)).toBe('first-second');
  });

  it('refuses empty stdin with E_INPUT', async () => {
    await expect(readSecretValue(Readable.from([Buffer.from('\n')]), () => undefined)).rejects.toSatisfy((error) => isCairnError(error) && error.code === 'E_INPUT');
  });

  it('at a terminal, reads one line without echo and restores the mode', async () => {
    const modes: boolean[] = [];
    const tty = Object.assign(Readable.from([Buffer.from('typed-'), Buffer.from('value\rignored')]), { isTTY: true, setRawMode: (mode: boolean) => modes.push(mode) });
    const prompts: string[] = [];
    expect(text(await readSecretValue(tty, (p) => prompts.push(p)))).toBe('typed-value');
    expect(modes).toEqual([true, false]);
    expect(prompts.join('')).not.toContain('typed');
  });

  it('takes RunSpec secret names only', () => {
    expect(parseSecretName('API_TOKEN')).toBe('API_TOKEN');
    expect(() => parseSecretName('api token')).toThrow(/secret name/);
  });
});

describe('cairn secrets: grantees', () => {
  it('takes key:<key id> and scope:<scope>, each once, and refuses anything else as a usage error', () => {
    expect(parseGrantee('key:5f0c2a1e-0000-4000-8000-000000000001')).toBe('key:5f0c2a1e-0000-4000-8000-000000000001');
    expect(parseGrantList('scope:runs:write', ['key:abc'])).toEqual(['key:abc', 'scope:runs:write']);
    for (const bad of ['abc', 'key:', 'scope:root', 'tenant:acme']) {
      expect(() => parseGrantee(bad)).toThrow(/invalid grantee/);
    }
    expect(() => parseGrantList('key:abc', ['key:abc'])).toThrow(/given twice/);
    expect(() => parseGrantee('nope')).toThrow(expect.objectContaining({ code: 'E_INPUT' }));
  });

  it('lists grantees, or says only admin keys may use it', () => {
    expect(grantsColumn([])).toBe('(admin keys only)');
    expect(grantsColumn([{ grantee: 'key:abc' }, { grantee: 'scope:runs:write' }])).toBe('key:abc,scope:runs:write');
  });
});
