import { parseRunSpec } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import { idempotencyBodySha256 } from './submit-run.handler.js';

const ID = `sha256:${'c'.repeat(64)}`;
const spec = (cached: boolean, digest = 'd'.repeat(64)) =>
  parseRunSpec({
    name: 'built',
    image: `cairn/built:0123456789abcdef@${ID}`,
    steps: [{ name: 's', argv: ['true'] }],
    imageBuild: { digest, dockerfileSha256: 'e'.repeat(64), bases: [], imageId: ID, cached },
  });

describe('what an Idempotency-Key is compared on', () => {
  it('given a spec without a build, then it is the spec\'s own sha256', () => {
    const plain = parseRunSpec({ name: 'plain', steps: [{ name: 's', argv: ['true'] }] });
    expect(idempotencyBodySha256(plain)).toBe(sha256Hex(canonicalJson(plain)));
  });

  it('given the same build found built the second time, then the two compare equal; another build does not', () => {
    expect(idempotencyBodySha256(spec(true))).toBe(idempotencyBodySha256(spec(false)));
    expect(idempotencyBodySha256(spec(false, 'f'.repeat(64)))).not.toBe(idempotencyBodySha256(spec(false)));
  });
});
