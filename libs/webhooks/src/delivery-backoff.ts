/** When a failed delivery is tried again, and when it is given up (dead-lettered). */
export interface RetryPolicy {
  /** Attempts in all, the first included; after the last failure the delivery is dead. */
  maxAttempts: number;
  /** The wait after the first failure; it doubles with each further failure. */
  baseDelayMs: number;
  /** The longest wait between two attempts. */
  maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { maxAttempts: 8, baseDelayMs: 1_000, maxDelayMs: 3_600_000 };

/**
 * What follows failed attempt number `attempt` (1-based): `dead`, or a retry after
 * `base * 2^(attempt-1)` capped at `maxDelayMs`, less up to 20 % jitter (`random` in [0, 1)) so
 * receivers that come back are not hit by every delivery at once.
 */
export function afterFailure(policy: RetryPolicy, attempt: number, random: number = Math.random()): { dead: true } | { dead: false; delayMs: number } {
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError('attempt: 1 or more');
  if (attempt >= policy.maxAttempts) return { dead: true };
  const full = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(attempt - 1, 40));
  const jitter = Math.min(Math.max(random, 0), 0.999_999) * 0.2;
  return { dead: false, delayMs: Math.max(1, Math.round(full * (1 - jitter))) };
}
