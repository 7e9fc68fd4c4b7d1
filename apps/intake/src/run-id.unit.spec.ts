import { RunIdSchema } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { newRunId } from './run-id.js';

describe('newRunId', () => {
  it('is run_ + 26 lower-case base32 characters, valid as a run id', () => {
    const id = newRunId();
    expect(id).toMatch(/^run_[0-9a-hjkmnp-tv-z]{26}$/);
    expect(RunIdSchema.safeParse(id).success).toBe(true);
  });

  it('sorts by time', () => {
    const zeros = new Uint8Array(16);
    const ids = [0, 1, 31, 32, 1_700_000_000_000, 1_700_000_000_001, 4_000_000_000_000].map((t) => newRunId(t, zeros));
    expect([...ids].sort()).toEqual(ids);
    expect(newRunId(0, zeros)).toBe(`run_${'0'.repeat(26)}`);
  });

  it('differs between calls in the same millisecond', () => {
    const now = Date.now();
    const ids = new Set(Array.from({ length: 1000 }, () => newRunId(now)));
    expect(ids.size).toBe(1000);
  });
});
