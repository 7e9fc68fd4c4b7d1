import { MAX_RUN_RETRIES } from '@cairn/contracts';

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

/** The lost attempt's placement, as its `run.scheduled` names it. */
export interface LostPlacement {
  readonly attempt: number;
  readonly worker_id: string;
  readonly lease_id: string;
}

/**
 * How the loss of `placement`'s worker goes on the record (ADR 0035): `run.retried` while the
 * RunSpec's `retries` (absent: 0) allow another attempt, keyed `retried-<attempt>` so that the
 * scheduler's lease scan and the runtime's restart store one between them; else `run.failed`
 * `E_WORKER_LOST`. Anything but a whole number 0–3 of retries is none (policy refused it anyway).
 * Both are caused by the lost attempt's `run.scheduled`.
 */
export type LostWorkerRecord =
  | {
      readonly type: 'run.retried';
      readonly key: string;
      readonly fields: { attempt: number; error_code: 'E_WORKER_LOST'; worker_id: string; lease_id: string; message: string; retries_left: number };
    }
  | { readonly type: 'run.failed'; readonly fields: { error_code: 'E_WORKER_LOST'; message: string } };

const MAX_MESSAGE = 2000;

export function lostWorkerRecord(retries: unknown, placement: LostPlacement, lost: string): LostWorkerRecord {
  const allowed = typeof retries === 'number' && Number.isInteger(retries) && retries >= 0 && retries <= MAX_RUN_RETRIES ? retries : 0;
  if (placement.attempt <= allowed) {
    const retries_left = allowed - placement.attempt;
    const message = `${lost}; attempt ${placement.attempt + 1} of ${allowed + 1} is placed next (${retries_left} more left after it)`;
    return {
      type: 'run.retried',
      key: `retried-${placement.attempt}`,
      fields: { attempt: placement.attempt, error_code: 'E_WORKER_LOST', worker_id: placement.worker_id, lease_id: placement.lease_id, message: message.slice(0, MAX_MESSAGE), retries_left },
    };
  }
  const why = allowed === 0 ? 'the run did not opt into retries' : `all ${allowed} retries are used`;
  return { type: 'run.failed', fields: { error_code: 'E_WORKER_LOST', message: `${lost}; ${why}`.slice(0, MAX_MESSAGE) } };
}

/** The `retries` the run's RunSpec asked for (absent: 0), from its `run.submitted`. */
export function retriesOf(receipts: readonly { readonly type: string }[]): number {
  const submitted = receipts.find((r) => r.type === 'run.submitted') as { spec?: { retries?: unknown } } | undefined;
  const retries = submitted?.spec?.retries;
  return typeof retries === 'number' ? retries : 0;
}
