/*
 * A token bucket per caller (an API key's id, or a key's digest where the id is unknown): each
 * holds up to `burst` tokens, refilled at `perSecond`; a request takes one or is refused with how
 * long until one is back. In memory, per process: a limit of each gateway, not of the cluster.
 */

export interface RateLimit {
  /** Tokens a bucket gains per second (the sustained rate). */
  perSecond: number;
  /** Tokens a full bucket holds (the burst a caller may send at once). */
  burst: number;
}

export type RateDecision = { allowed: true; remaining: number } | { allowed: false; retryAfterSeconds: number };

interface Bucket {
  tokens: number;
  at: number;
}

/** Past this many buckets, the full ones (idle callers) are forgotten: a full bucket and none are the same. */
const SWEEP_ABOVE = 10_000;

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly limit: RateLimit,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (!(limit.perSecond > 0) || !(limit.burst >= 1)) throw new RangeError('a rate limit needs perSecond > 0 and burst >= 1');
  }

  /** Takes a token of `caller`'s bucket, or says how many whole seconds until one is back (at least 1). */
  take(caller: string): RateDecision {
    const now = this.now();
    const bucket = this.refilled(caller, now);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true, remaining: Math.floor(bucket.tokens) };
    }
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / this.limit.perSecond)) };
  }

  /** How many callers have a bucket now (for tests and logs). */
  get size(): number {
    return this.buckets.size;
  }

  private refilled(caller: string, now: number): Bucket {
    let bucket = this.buckets.get(caller);
    if (bucket === undefined) {
      if (this.buckets.size >= SWEEP_ABOVE) this.sweep(now);
      bucket = { tokens: this.limit.burst, at: now };
      this.buckets.set(caller, bucket);
      return bucket;
    }
    const elapsed = Math.max(0, now - bucket.at) / 1000;
    bucket.tokens = Math.min(this.limit.burst, bucket.tokens + elapsed * this.limit.perSecond);
    bucket.at = now;
    return bucket;
  }

  private sweep(now: number): void {
    for (const [caller, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.at) / 1000) * this.limit.perSecond >= this.limit.burst) this.buckets.delete(caller);
    }
  }
}
