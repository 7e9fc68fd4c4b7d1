import { describe, expect, it } from 'vitest';
import { afterFailure } from './delivery-backoff.js';

const policy = { maxAttempts: 5, baseDelayMs: 1000, maxDelayMs: 5000 };

describe('afterFailure', () => {
  it('doubles the wait after each failure, capped, without jitter at random 0', () => {
    expect([1, 2, 3, 4].map((attempt) => afterFailure(policy, attempt, 0))).toEqual([
      { dead: false, delayMs: 1000 },
      { dead: false, delayMs: 2000 },
      { dead: false, delayMs: 4000 },
      { dead: false, delayMs: 5000 },
    ]);
  });

  it('takes off at most 20 % as jitter', () => {
    expect(afterFailure(policy, 2, 0.5)).toEqual({ dead: false, delayMs: 1800 });
    const lowest = afterFailure(policy, 2, 0.999_999_9);
    expect(lowest.dead === false && lowest.delayMs >= 1600 && lowest.delayMs < 2000).toBe(true);
  });

  it('dead-letters after the last attempt', () => {
    expect(afterFailure(policy, 5)).toEqual({ dead: true });
    expect(afterFailure({ ...policy, maxAttempts: 1 }, 1)).toEqual({ dead: true });
    expect(() => afterFailure(policy, 0)).toThrow(RangeError);
  });

  it('never overflows on a huge attempt count', () => {
    expect(afterFailure({ ...policy, maxAttempts: 10_000 }, 5000, 0)).toEqual({ dead: false, delayMs: 5000 });
  });
});
