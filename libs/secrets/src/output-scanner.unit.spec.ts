import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { KEY_PATTERNS } from './key-patterns.js';
import { OutputScanner, redactionMarker } from './output-scanner.js';
import type { ScannedSecret } from './output-scanner.js';

const bytes = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));
const text = (data: Uint8Array) => Buffer.from(data).toString('utf8');
/** Fake credentials, assembled here so that no scanner takes this file for a leak. */
const FAKE = {
  aws: ['AKIA', 'IOSFODNN7EXAMPLE'].join(''),
  github: ['ghp', '_', 'a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8'].join(''),
  githubPat: ['github', '_pat_', '11ABCDEFG0', 'x'.repeat(72)].join(''),
  openai: ['sk-', 'proj-', 'A'.repeat(20), 'T3Blbk', 'FJ', 'b'.repeat(20)].join(''),
  openaiLegacy: ['sk-', 'Z'.repeat(48)].join(''),
  anthropic: ['sk-ant-', 'api03-', 'c'.repeat(93)].join(''),
  slack: ['xox', 'b-', '123456789012-', '1234567890123-', 'AbCdEfGhIjKlMnOpQrStUvWx'].join(''),
  slackHook: ['https://hooks.slack.com/services/', 'T0123ABCD/', 'B0123ABCD/', 'abcdefghijklmnopqrstuvwx'].join(''),
  stripe: ['sk_', 'live_', '4eC39HqLyjWDarjtT1zdp7dc'].join(''),
  google: ['AI', 'za', 'SyA-', 'd'.repeat(31)].join(''),
  gitlab: ['glpat', '-', 'e'.repeat(20)].join(''),
  npm: ['npm', '_', 'f'.repeat(36)].join(''),
  cairn: ['cairn', '_abcdefgh_', 'g'.repeat(43)].join(''),
  pem: ['-----BEGIN RSA PRIVATE', ' KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE', ' KEY-----'].join(''),
};

describe('OutputScanner: the run’s secrets', () => {
  const value = 'Zq9-tok3n/with+odd=chars ü';
  const scanner = new OutputScanner([{ name: 'API_TOKEN', value: bytes(value) }]);

  it('given output without the secret, when scanned, then the very same bytes come back and nothing is found', () => {
    const input = bytes('hello world\nZq9-tok3 almost\n');
    const outcome = scanner.scan(input);
    expect(outcome.findings).toEqual([]);
    expect(outcome.bytes).toBe(input);
  });

  it('given the plain value, when scanned, then each occurrence becomes [REDACTED:API_TOKEN] and is counted', () => {
    const outcome = scanner.scan(bytes(`a ${value} b ${value}\n`));
    expect(text(outcome.bytes)).toBe('a [REDACTED:API_TOKEN] b [REDACTED:API_TOKEN]\n');
    expect(outcome.findings).toEqual([{ pattern: 'secret.plain', secret: 'API_TOKEN', count: 2 }]);
  });

  it.each([0, 1, 2, 5])('given the value base64-encoded after %i other bytes, when scanned, then it is found and redacted', (prefix) => {
    const encoded = Buffer.concat([randomBytes(prefix), Buffer.from(value, 'utf8'), randomBytes(7)]).toString('base64');
    const outcome = scanner.scan(bytes(`data: ${encoded}\n`));
    expect(outcome.findings.map((f) => f.pattern)).toEqual(['secret.base64']);
    expect(text(outcome.bytes)).toContain(redactionMarker('API_TOKEN'));
    // What is left of the encoding no longer decodes to the value.
    expect(Buffer.from(text(outcome.bytes).replace(/^data: |\n$/g, ''), 'base64').toString('utf8')).not.toContain(value);
  });

  it('given the value base64-encoded with line wraps (as `base64` prints long input), when scanned, then it is found', () => {
    const long = new OutputScanner([{ name: 'LONG', value: bytes('x'.repeat(20) + value + 'y'.repeat(80)) }]);
    const wrapped = Buffer.from('x'.repeat(20) + value + 'y'.repeat(80), 'utf8').toString('base64').replace(/(.{76})/g, '$1\n');
    expect(wrapped).toContain('\n');
    const outcome = long.scan(bytes(wrapped));
    expect(outcome.findings).toEqual([{ pattern: 'secret.base64', secret: 'LONG', count: 1 }]);
  });

  it('given the value as base64url, hex (either case), URL-encoded or JSON-escaped, when scanned, then each is found by its encoding', () => {
    const raw = Buffer.from(value, 'utf8');
    const cases: [string, string][] = [
      [raw.toString('hex'), 'secret.hex'],
      [raw.toString('hex').toUpperCase(), 'secret.hex'],
      [encodeURIComponent(value), 'secret.url'],
      [JSON.stringify({ token: `${value}"x` }), 'secret.plain'],
    ];
    for (const [spelled, pattern] of cases) {
      const outcome = scanner.scan(bytes(`>${spelled}<`));
      expect(outcome.findings.map((f) => f.pattern), spelled).toEqual([pattern]);
    }
    // A value whose base64 has + and /, so base64url spells it differently.
    const urlSafe = new OutputScanner([{ name: 'URLSAFE', value: bytes('???>>>secret~~~') }]);
    expect(Buffer.from('???>>>secret~~~').toString('base64')).toMatch(/[+/]/);
    expect(urlSafe.scan(bytes(Buffer.from('???>>>secret~~~').toString('base64url'))).findings).toEqual([{ pattern: 'secret.base64url', secret: 'URLSAFE', count: 1 }]);
    const quoted = new OutputScanner([{ name: 'QUOTED', value: bytes('pass"word\\with\nbreak') }]);
    expect(quoted.scan(bytes(JSON.stringify({ p: 'pass"word\\with\nbreak' }))).findings).toEqual([{ pattern: 'secret.json', secret: 'QUOTED', count: 1 }]);
  });

  it('given binary output around the value, when scanned, then every other byte is kept exactly', () => {
    const noise = randomBytes(4096);
    const input = new Uint8Array(Buffer.concat([noise, Buffer.from(value, 'utf8'), noise]));
    const outcome = scanner.scan(input);
    expect(Buffer.from(outcome.bytes)).toEqual(Buffer.concat([noise, Buffer.from(redactionMarker('API_TOKEN')), noise]));
  });

  it('given two secrets, when scanned, then each is named by its own marker and counted apart', () => {
    const two = new OutputScanner([
      { name: 'FIRST', value: bytes('first-secret-value') },
      { name: 'SECOND', value: bytes('second-secret-value') },
    ]);
    const outcome = two.scan(bytes('first-secret-value second-secret-value second-secret-value'));
    expect(text(outcome.bytes)).toBe('[REDACTED:FIRST] [REDACTED:SECOND] [REDACTED:SECOND]');
    expect(outcome.findings).toEqual([
      { pattern: 'secret.plain', secret: 'FIRST', count: 1 },
      { pattern: 'secret.plain', secret: 'SECOND', count: 2 },
    ]);
  });

  it('given a stored secret that also has a key pattern’s shape, when scanned, then it is named by its secret', () => {
    const outcome = new OutputScanner([{ name: 'GH', value: bytes(FAKE.github) }]).scan(bytes(`token ${FAKE.github}`));
    expect(outcome.findings).toEqual([{ pattern: 'secret.plain', secret: 'GH', count: 1 }]);
    expect(text(outcome.bytes)).toBe('token [REDACTED:GH]');
  });
});

describe('OutputScanner: key patterns, without any secret', () => {
  const scanner = new OutputScanner([]);
  const expected: Record<keyof typeof FAKE, string> = {
    aws: 'aws-access-key-id',
    github: 'github-token',
    githubPat: 'github-pat',
    openai: 'openai-key',
    openaiLegacy: 'openai-key',
    anthropic: 'anthropic-key',
    slack: 'slack-token',
    slackHook: 'slack-webhook',
    stripe: 'stripe-secret-key',
    google: 'google-api-key',
    gitlab: 'gitlab-token',
    npm: 'npm-token',
    cairn: 'cairn-api-key',
    pem: 'private-key',
  };

  it.each(Object.entries(expected))('given %s in output, when scanned, then it is redacted as %s', (which, pattern) => {
    const fake = FAKE[which as keyof typeof FAKE];
    const outcome = scanner.scan(bytes(`before ${fake} after\n`));
    expect(outcome.findings).toEqual([{ pattern, secret: null, count: 1 }]);
    expect(text(outcome.bytes)).toBe(`before ${redactionMarker(pattern)} after\n`);
  });

  it('given a private key block cut off before its END line, when scanned, then everything from BEGIN on is redacted', () => {
    const outcome = scanner.scan(bytes('log\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nmore'));
    expect(text(outcome.bytes)).toBe('log\n[REDACTED:private-key]');
  });

  it('given ordinary output (hashes, ids, words that start like keys), when scanned, then nothing is found', () => {
    const ordinary = [
      'sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      'run_01m8n6186ph8y70crbpexwrfrp AKIA is a prefix, and so is ghp_',
      'sk-learn 1.5; sk-' + 'a'.repeat(47),
      'AKIA' + 'IOSFODNN7EXAMPLE' + 'X', // one character too long
      '-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----',
      'npm_config_cache=/tmp/npm',
    ].join('\n');
    expect(scanner.scan(bytes(ordinary)).findings).toEqual([]);
  });

  it('has a distinct token id and a global regex for every pattern', () => {
    expect(new Set(KEY_PATTERNS.map((p) => p.id)).size).toBe(KEY_PATTERNS.length);
    for (const p of KEY_PATTERNS) {
      expect(p.id).toMatch(/^[a-z0-9][a-z0-9_.-]{0,63}$/);
      expect(p.regex.flags).toContain('g');
    }
  });

  it('scans a MiB of output with 32 secrets in well under a second', () => {
    const secrets = Array.from({ length: 32 }, (_, i) => ({ name: `S${i}`, value: new Uint8Array(randomBytes(24).toString('base64url').split('').map((c) => c.charCodeAt(0))) }));
    const big = new OutputScanner(secrets);
    const output = new Uint8Array(Buffer.from(randomBytes(768 * 1024).toString('base64')));
    const started = performance.now();
    const outcome = big.scan(output);
    const ms = performance.now() - started;
    expect(outcome.bytes.length).toBe(output.length);
    expect(ms).toBeLessThan(1000);
  });
});

describe('OutputScanner.heldTail: what streamed output must hold back', () => {
  const value = 'Zq9tok3nValue42';
  const scanner = new OutputScanner([{ name: 'API_TOKEN', value: bytes(value) }]);
  const latin1 = (s: string) => Buffer.from(s, 'utf8').toString('latin1');

  it('holds nothing after a finished line', () => {
    expect(scanner.heldTail('all done\n')).toBe(0);
  });

  it('holds the start of a secret, in any spelling, also across a line break', () => {
    expect(scanner.heldTail(`x ${value.slice(0, 5)}`)).toBe(5);
    const hex = Buffer.from(value).toString('hex');
    expect(scanner.heldTail(`x ${hex.slice(0, 6)}\n${hex.slice(6, 10)}\n`)).toBe(12);
    expect(scanner.heldTail(latin1(`x=${encodeURIComponent(value).slice(0, 4)}`))).toBeGreaterThanOrEqual(4);
  });

  it('holds a key being written, the armour of a private key, and an open private key block', () => {
    expect(scanner.heldTail(`token ${FAKE.github.slice(0, 12)}`)).toBe(12);
    expect(scanner.heldTail('-----BEGIN RSA PRIV')).toBe(19);
    const open = `before\n${FAKE.pem.slice(0, FAKE.pem.indexOf('-----END'))}`;
    expect(scanner.heldTail(open)).toBe(open.length - 'before\n'.length);
    expect(scanner.heldTail(`${FAKE.pem}\n`)).toBe(0);
  });
});

describe('OutputScanner: secrets as a workload prints them back', () => {
  const secret = (name: string, value: string): ScannedSecret => ({ name, value: new Uint8Array(Buffer.from(value, 'utf8')) });
  const scanText = (scanner: OutputScanner, text: string) => scanner.scanText(text);

  it('finds a value stored with a trailing newline when it is printed trimmed (`echo $(cat …)`)', () => {
    const scanner = new OutputScanner([secret('TOKEN', 'tok-3f9a1c7e2b\n')]);
    const out = scanText(scanner, 'value: tok-3f9a1c7e2b!');
    expect(out.text).toBe('value: [REDACTED:TOKEN]!');
    expect(out.findings).toEqual([{ pattern: 'secret.plain', secret: 'TOKEN', count: 1 }]);
    // its trimmed spellings too
    const hex = Buffer.from('tok-3f9a1c7e2b').toString('hex');
    expect(scanText(scanner, `h=${hex}`).text).toBe('h=[REDACTED:TOKEN]');
  });

  it('finds one line of a multi-line secret (a PEM body line) printed alone', () => {
    const body = ['MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7', 'Xq8Kd2L0c5Rj3yJm1zWv9Tq4sHfQ0pN7uE6bA2oC1xYk8gD5lV3h', 'short'];
    const pem = `-----BEGIN RSA PRIVATE KEY-----\n${body.join('\n')}\n-----END RSA PRIVATE KEY-----\n`;
    const scanner = new OutputScanner([secret('DEPLOY_KEY', pem)], []);
    const out = scanText(scanner, `line 2 is ${body[1]} and that is all`);
    expect(out.text).toBe('line 2 is [REDACTED:DEPLOY_KEY] and that is all');
    expect(out.findings).toEqual([{ pattern: 'secret.line', secret: 'DEPLOY_KEY', count: 1 }]);
    // a line shorter than the needle minimum is not looked for: it would match ordinary output
    expect(scanText(scanner, 'a short line').findings).toEqual([]);
  });

  it('keeps text it finds nothing in as the same string', () => {
    const scanner = new OutputScanner([secret('TOKEN', 'tok-3f9a1c7e2b')]);
    const text = 'nothing here ✓';
    expect(scanText(scanner, text).text).toBe(text);
  });
});
