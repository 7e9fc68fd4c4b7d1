import { OutputScanner } from '@cairn/secrets';
import { describe, expect, it } from 'vitest';
import { LiveRedactor, safeCut } from './live-output.js';

const SECRET = 'Zq8rT2mWx9LkP4vN';
const bytes = (s: string) => new Uint8Array(Buffer.from(s, 'latin1'));
const text = (b: Uint8Array) => Buffer.from(b).toString('latin1');
const scanner = new OutputScanner([{ name: 'API_TOKEN', value: new Uint8Array(Buffer.from(SECRET, 'utf8')) }]);
const GITHUB = `ghp_${'a1B2c3D4e5'.repeat(3)}XyZ789`;
/** Assembled, so that no scanner takes this file for a leak. */
const PEM = ['-----BEGIN RSA PRIVATE', ' KEY-----\nMIIEowIBAAKCAQEA7pX9\nq2Wd0c+Y\n-----END RSA PRIVATE', ' KEY-----\n'].join('');

/** Feeds `writes` one by one; returns what was let out after each, and at the end. */
function stream(writes: readonly string[], limit = 1 << 20): { afterEach: string[]; final: string; findings: unknown[] } {
  let out = '';
  const redactor = new LiveRedactor(scanner, limit, (b) => (out += text(b)));
  const afterEach: string[] = [];
  for (const w of writes) {
    redactor.push(bytes(w));
    afterEach.push(out);
  }
  const finished = redactor.finish();
  expect(text(finished.bytes)).toBe(out);
  return { afterEach, final: out, findings: [...finished.findings] };
}

/** Deterministic pseudo-random numbers, so a failure can be replayed. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

describe('LiveRedactor', () => {
  it('lets a finished line out at once', () => {
    const { afterEach } = stream(['line one\n', 'line two\n']);
    expect(afterEach).toEqual(['line one\n', 'line one\nline two\n']);
  });

  it('never lets out part of a secret split across two writes, in any spelling', () => {
    const spellings = [
      SECRET,
      Buffer.from(SECRET).toString('base64'),
      Buffer.from(SECRET).toString('hex'),
      // base64 wrapped over lines, as encoders do
      Buffer.from(`${SECRET}${SECRET}`).toString('base64').replace(/(.{8})/g, '$1\n'),
      encodeURIComponent(SECRET),
    ];
    for (const spelling of spellings) {
      const whole = `before ${spelling} after\n`;
      for (let cut = 1; cut < whole.length; cut++) {
        const { afterEach, final, findings } = stream([whole.slice(0, cut), whole.slice(cut)]);
        expect(final, `${spelling} cut at ${cut}`).toBe(text(scanner.scan(bytes(whole)).bytes));
        expect(final).toContain('[REDACTED:API_TOKEN]');
        expect(findings.length).toBeGreaterThan(0);
        // What was out after the first write is where the final output starts: nothing taken back.
        expect(final.startsWith(afterEach[0]!)).toBe(true);
        for (const part of [SECRET.slice(0, 6), Buffer.from(SECRET).toString('hex').slice(0, 12)]) expect(afterEach[0]).not.toContain(part);
      }
    }
  });

  it('holds a key being written and a private key block until it is complete', () => {
    const keyed = stream(['token: ', GITHUB.slice(0, 10), GITHUB.slice(10), ' done\n']);
    expect(keyed.afterEach[1]).toBe('token: ');
    expect(keyed.final).toBe('token: [REDACTED:github-token] done\n');
    const lines = PEM.split(/(?<=\n)/);
    const pem = stream(['key follows\n', ...lines, 'after\n']);
    for (const seen of pem.afterEach.slice(1, lines.length)) expect(seen).toBe('key follows\n');
    expect(pem.final).toBe('key follows\n[REDACTED:private-key]\nafter\n');
  });

  it('an unclosed private key block is never let out, not even at the end', () => {
    const { final } = stream([['-----BEGIN EC PRIVATE', ' KEY-----\n'].join(''), 'MHcCAQEEIB\n', 'more\n']);
    expect(final).toBe('[REDACTED:private-key]');
  });

  it('keeps only the first `limit` bytes, like the driver', () => {
    const { final } = stream(['abcdef\n', 'ghij\n'], 9);
    expect(final).toBe('abcdef\ngh');
  });

  it('whatever the writes, what is let out is always a prefix of the whole output scanned at once, and ends as all of it', () => {
    const pieces = ['hello ', 'world\n', SECRET, Buffer.from(SECRET).toString('base64'), GITHUB, PEM, 'x-y_z ', '\r\n', 'AKIA', 'sk-', '-----', '=== ', Buffer.from(SECRET).toString('hex').toUpperCase()];
    const random = rng(20261130);
    for (let round = 0; round < 300; round++) {
      let whole = '';
      for (let i = 0; i < 12; i++) whole += pieces[Math.floor(random() * pieces.length)]!;
      const writes: string[] = [];
      for (let at = 0; at < whole.length; ) {
        const size = 1 + Math.floor(random() * 24);
        writes.push(whole.slice(at, at + size));
        at += size;
      }
      const expected = text(scanner.scan(bytes(whole)).bytes);
      const { afterEach, final } = stream(writes);
      expect(final, whole).toBe(expected);
      for (const seen of afterEach) expect(expected.startsWith(seen), whole).toBe(true);
    }
  });
});

describe('safeCut', () => {
  it('cuts before the held tail and never right after a character a key continues with', () => {
    expect(safeCut('abc def\n', 0)).toBe(8);
    expect(safeCut('abc def', 0)).toBe(4);
    expect(safeCut('abc def\nxyz', 3)).toBe(8);
    expect(safeCut('abcdef', 0)).toBe(0);
  });
});
