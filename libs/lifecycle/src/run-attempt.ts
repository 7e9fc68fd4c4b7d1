/**
 * A run's attempts on its one chain (ADR 0035). A lost worker's attempt ends with `run.retried`
 * and the next one starts with the next `run.scheduled`; nothing is deleted, so a reader of "the
 * steps" of a run reads them through `attemptOf`, never off the whole chain.
 */

/** The least a receipt must show to be split into attempts. */
interface Typed {
  readonly type: string;
}

/** One attempt that was lost: from its first `run.scheduled` up to and including its `run.retried`. */
export interface LostAttempt<R extends Typed> {
  /** 1 for the first attempt. */
  readonly attempt: number;
  readonly receipts: readonly R[];
}

/** A chain split into what every attempt shares, the lost attempts, and the current one. */
export interface RunAttempts<R extends Typed> {
  /** The receipts before the first `run.scheduled`: submission, decision, run approvals. */
  readonly shared: readonly R[];
  readonly lost: readonly LostAttempt<R>[];
  /** The attempt in force: 1 + the number of `run.retried` receipts. */
  readonly attempt: number;
  /** The current attempt's own receipts (after the last `run.retried`, or from the first `run.scheduled`). */
  readonly current: readonly R[];
}

export function splitAttempts<R extends Typed>(receipts: readonly R[]): RunAttempts<R> {
  const firstPlacement = receipts.findIndex((r) => r.type === 'run.scheduled');
  if (firstPlacement < 0) return { shared: [...receipts], lost: [], attempt: 1, current: [] };
  const shared = receipts.slice(0, firstPlacement);
  const lost: LostAttempt<R>[] = [];
  let from = firstPlacement;
  for (let i = firstPlacement; i < receipts.length; i++) {
    if (receipts[i]?.type !== 'run.retried') continue;
    lost.push({ attempt: lost.length + 1, receipts: receipts.slice(from, i + 1) });
    from = i + 1;
  }
  return { shared, lost, attempt: lost.length + 1, current: receipts.slice(from) };
}

/**
 * The receipts of the run's current attempt, as one chain without retries would hold them: those
 * before the first `run.scheduled` plus those after the last `run.retried`. On a chain with no
 * `run.retried` this is the chain itself, in order.
 */
export function attemptOf<R extends Typed>(receipts: readonly R[]): R[] {
  const { shared, current } = splitAttempts(receipts);
  return [...shared, ...current];
}
