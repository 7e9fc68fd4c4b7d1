import { WorkerIdSchema } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { generatedId } from './worker-identity.js';

describe('generatedId', () => {
  it('is the host name as a worker id with 8 random hex digits: a valid id, different on every first start', () => {
    const one = generatedId('Box-7');
    expect(one).toMatch(/^box-7-[0-9a-f]{8}$/);
    expect(generatedId('Box-7')).not.toBe(one);
  });

  it('stays a valid worker id (at most 64) for the longest host names', () => {
    const id = generatedId(`${'h'.repeat(63)}.example`);
    expect(id.length).toBeLessThanOrEqual(64);
    expect(WorkerIdSchema.safeParse(id).success).toBe(true);
  });
});
