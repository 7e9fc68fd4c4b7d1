import { describe, expect, it } from 'vitest';
import { OutputScanner } from './output-scanner.js';
import { redactJson } from './redact-json.js';

const scanner = new OutputScanner([{ name: 'TOKEN', value: new Uint8Array(Buffer.from('s3cr3t-canary-value', 'utf8')) }]);

describe('redactJson', () => {
  it('redacts keys and values wherever they are, and says under which top-level field', () => {
    const fields = {
      artifact_hashes: { '/out/s3cr3t-canary-value': 'a'.repeat(64), '/out/ok.txt': 'b'.repeat(64) },
      host: 's3cr3t-canary-value.example',
      nested: { list: [{ name: 'test s3cr3t-canary-value' }, 3, true, null] },
      count: 2,
    };
    const out = redactJson(scanner, fields);
    expect(JSON.stringify(out.value)).not.toContain('s3cr3t-canary-value');
    expect(out.value.artifact_hashes).toEqual({ '/out/[REDACTED:TOKEN]': 'a'.repeat(64), '/out/ok.txt': 'b'.repeat(64) });
    expect(out.value.host).toBe('[REDACTED:TOKEN].example');
    expect(out.value.nested.list[0]).toEqual({ name: 'test [REDACTED:TOKEN]' });
    expect(out.value.count).toBe(2);
    expect(out.findings.map((f) => [f.field, f.inKey, f.secret, f.pattern])).toEqual([
      ['artifact_hashes', true, 'TOKEN', 'secret.plain'],
      ['host', false, 'TOKEN', 'secret.plain'],
      ['nested', false, 'TOKEN', 'secret.plain'],
    ]);
  });

  it('returns the very same object when nothing is found', () => {
    const fields = { a: { b: ['c', 1] }, d: 'e' };
    const out = redactJson(scanner, fields);
    expect(out.value).toBe(fields);
    expect(out.findings).toEqual([]);
  });

  it('keeps two keys that redact alike apart, losing no entry', () => {
    const hex = Buffer.from('s3cr3t-canary-value').toString('hex');
    const out = redactJson(scanner, { files: { '/out/s3cr3t-canary-value': '1', [`/out/${hex}`]: '2' } });
    expect(Object.keys(out.value.files).sort()).toEqual(['/out/[REDACTED:TOKEN]', '/out/[REDACTED:TOKEN] (2)']);
    expect(out.findings).toHaveLength(2);
  });

  it('finds key patterns too, with no secret of the run', () => {
    const keys = new OutputScanner([]);
    const out = redactJson(keys, { message: `token ghp_${'a'.repeat(36)} refused` });
    expect(out.value.message).toBe('token [REDACTED:github-token] refused');
    expect(out.findings[0]).toMatchObject({ field: 'message', pattern: 'github-token', secret: null });
  });
});
