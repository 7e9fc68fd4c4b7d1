import { describe, expect, it } from 'vitest';
import { SealKeysSchema, VerifierKeySchema } from './seal-signature.schema.js';

// golang.org/x/mod/sumdb/note, note_test.go: the verifier key of its examples.
const GO_VERIFIER_KEY = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';

describe('VerifierKeySchema', () => {
  it('takes a verifier key as golang.org/x/mod/sumdb/note writes it (0x01 and 32 key bytes: 44 base64 characters, no padding)', () => {
    expect(VerifierKeySchema.parse(GO_VERIFIER_KEY)).toBe(GO_VERIFIER_KEY);
    expect(SealKeysSchema.parse({ keys: [{ key: GO_VERIFIER_KEY, name: 'PeterNeumann', keyId: 'c74f20a3', status: 'current' }] }).keys).toHaveLength(1);
  });

  it.each([
    ['the key bytes without the algorithm byte', 'PeterNeumann+c74f20a3+Gpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TU='],
    ['a short key', GO_VERIFIER_KEY.slice(0, -1)],
    ['no key id', 'PeterNeumann+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW'],
    ['a space in the name', `Peter Neumann+c74f20a3+${GO_VERIFIER_KEY.split('+')[2]!}`],
  ])('refuses %s', (_what, key) => {
    expect(VerifierKeySchema.safeParse(key).success).toBe(false);
  });
});
