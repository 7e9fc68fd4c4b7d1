import { CairnError, isCairnError } from '@cairn/contracts';

export interface AppendOptions {
  /**
   * Guarded append: store the event only while the chain's head is still this chain seq (0: the
   * chain is empty), i.e. onto the head the caller decided from. When another writer moved the
   * head, nothing is stored and the append fails `E_CONFLICT` with `details.reason` `head_moved`
   * (no retry: the caller reads again and decides again) — unless this logical event is already
   * stored, which is returned with `duplicate: true` as for any append.
   */
  expectedHeadSeq?: number;
  /**
   * Append past a message that is not a receipt (ADR 0033): when the chain's last message is one,
   * the append goes onto the last receipt before it (its seq and hash; the poison message is no
   * part of the hash chain), compare-and-set on the poison message's stream seq. Only for
   * recording the break and what may follow an ending; without it such a head is E_CHAIN_BROKEN
   * `not_a_receipt`, so nothing is ever appended past a poison message unawares.
   */
  pastBreaks?: boolean;
}

/** `details.reason` of the conflict a guarded append fails with. */
export const HEAD_MOVED = 'head_moved';

/** The `expectedHeadSeq` option, checked before anything is read or published (E_INPUT). */
export function checkExpectedHeadSeq(options: AppendOptions): number | undefined {
  const expected = options.expectedHeadSeq;
  if (expected === undefined) return undefined;
  if (!Number.isSafeInteger(expected) || expected < 0) {
    throw new CairnError('E_INPUT', `expectedHeadSeq must be a chain seq (an integer ≥ 0), got ${String(expected)}`);
  }
  return expected;
}

/**
 * What an append does with the chain head it found (`headSeq`): publish onto it (unguarded, or
 * the head is the expected one); `probe` when the head moved past the expected one — the event
 * itself may be what moved it (a retry after a lost ack), which only the duplicate window can
 * tell; `refuse` when the head is behind the expected one (the caller saw a chain that is not
 * stored).
 */
export function headGuardStep(headSeq: number, expected: number | undefined): 'publish' | 'probe' | 'refuse' {
  if (expected === undefined || headSeq === expected) return 'publish';
  return headSeq > expected ? 'probe' : 'refuse';
}

export function headMovedError(chainId: string, headSeq: number, expected: number): CairnError {
  return new CairnError('E_CONFLICT', `chain ${chainId} moved: its head is seq ${headSeq}, not the expected ${expected}`, {
    chainId,
    reason: HEAD_MOVED,
    expectedHeadSeq: expected,
    headSeq,
  });
}

/** Whether `error` is a guarded append refused because the chain's head was not where the caller saw it. */
export function isHeadMoved(error: unknown): boolean {
  return isCairnError(error) && error.code === 'E_CONFLICT' && error.details?.['reason'] === HEAD_MOVED;
}
