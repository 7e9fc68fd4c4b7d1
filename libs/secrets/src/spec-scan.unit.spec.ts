import { isCairnError, parseRunSpec } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { assertNoLiteralKeys, findLiteralKeys } from './spec-scan.js';

const AWS = ['AKIA', 'IOSFODNN7EXAMPLE'].join('');
const GITHUB = ['ghp', '_', 'Q'.repeat(36)].join('');

describe('findLiteralKeys / assertNoLiteralKeys', () => {
  it('given a RunSpec without credentials, when checked, then nothing is found', () => {
    const spec = parseRunSpec({ name: 'fine', steps: [{ argv: ['echo', 'hello'], env: { TOKEN_FILE: '/run/secrets/TOKEN' } }], secrets: ['TOKEN'] });
    expect(findLiteralKeys(spec)).toEqual([]);
    expect(() => assertNoLiteralKeys(spec)).not.toThrow();
  });

  it('given keys in argv, env and a base64 file, when checked, then each field is named with its pattern', () => {
    const spec = parseRunSpec({
      name: 'leaky',
      steps: [{ argv: ['curl', '-H', `Authorization: token ${GITHUB}`] }, { argv: ['aws', 's3', 'ls'], env: { AWS_ACCESS_KEY_ID: AWS } }],
      files: [{ path: '/work/creds', content: Buffer.from(`key=${AWS}\n`).toString('base64'), encoding: 'base64' }],
    });
    expect(findLiteralKeys(spec)).toEqual([
      { path: 'steps[0].argv[2]', pattern: 'github-token' },
      { path: 'steps[1].env.AWS_ACCESS_KEY_ID', pattern: 'aws-access-key-id' },
      { path: 'files[0].content', pattern: 'aws-access-key-id' },
    ]);
  });

  it('given a literal key, when asserted, then E_INPUT names the field and the secret store, never the value', () => {
    const spec = parseRunSpec({ name: 'leaky', steps: [{ argv: ['echo', GITHUB] }] });
    try {
      assertNoLiteralKeys(spec);
      throw new Error('expected E_INPUT');
    } catch (error) {
      expect(isCairnError(error) && error.code).toBe('E_INPUT');
      const message = (error as Error).message;
      expect(message).toContain('steps[0].argv[1]');
      expect(message).toContain('secret store');
      expect(message).not.toContain(GITHUB);
      expect(JSON.stringify((error as { details?: unknown }).details)).not.toContain(GITHUB);
    }
  });
});
