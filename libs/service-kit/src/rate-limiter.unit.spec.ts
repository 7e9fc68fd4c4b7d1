import { describe, expect, it } from 'vitest';
import { RateLimiter } from './rate-limiter.js';

function clock() {
  let t = 0;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe('RateLimiter: a token bucket per caller', () => {
  it('given a full bucket, when a burst is sent, then exactly `burst` pass and the next is told when to retry', () => {
    const time = clock();
    const limiter = new RateLimiter({ perSecond: 2, burst: 3 }, time.now);
    expect([1, 2, 3].map(() => limiter.take('a').allowed)).toEqual([true, true, true]);
    expect(limiter.take('a')).toEqual({ allowed: false, retryAfterSeconds: 1 });
  });

  it('given an empty bucket, when time passes, then tokens come back at the sustained rate and never above the burst', () => {
    const time = clock();
    const limiter = new RateLimiter({ perSecond: 2, burst: 3 }, time.now);
    for (let i = 0; i < 3; i++) limiter.take('a');
    time.advance(499);
    expect(limiter.take('a').allowed).toBe(false);
    time.advance(2);
    expect(limiter.take('a')).toEqual({ allowed: true, remaining: 0 });
    time.advance(60_000);
    expect([1, 2, 3, 4].map(() => limiter.take('a').allowed)).toEqual([true, true, true, false]);
  });

  it('given a slow refill, when refused, then Retry-After covers the wait in whole seconds', () => {
    const time = clock();
    const limiter = new RateLimiter({ perSecond: 0.1, burst: 1 }, time.now);
    expect(limiter.take('a').allowed).toBe(true);
    expect(limiter.take('a')).toEqual({ allowed: false, retryAfterSeconds: 10 });
    time.advance(4_000);
    expect(limiter.take('a')).toEqual({ allowed: false, retryAfterSeconds: 6 });
  });

  it('keeps callers apart: one caller emptying its bucket leaves another’s full', () => {
    const time = clock();
    const limiter = new RateLimiter({ perSecond: 1, burst: 2 }, time.now);
    limiter.take('a');
    limiter.take('a');
    expect(limiter.take('a').allowed).toBe(false);
    expect(limiter.take('b')).toEqual({ allowed: true, remaining: 1 });
  });

  it('forgets idle callers once it holds many, so memory stays bounded', () => {
    const time = clock();
    const limiter = new RateLimiter({ perSecond: 1, burst: 1 }, time.now);
    for (let i = 0; i < 10_000; i++) limiter.take(`k${i}`);
    time.advance(1_000);
    limiter.take('late');
    expect(limiter.size).toBe(1);
  });

  it('refuses a limit that could never pass a request', () => {
    expect(() => new RateLimiter({ perSecond: 0, burst: 1 })).toThrow(RangeError);
    expect(() => new RateLimiter({ perSecond: 1, burst: 0 })).toThrow(RangeError);
  });
});
