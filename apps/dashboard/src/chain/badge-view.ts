import { recordedBreaksOf } from '@cairn/evidence/recorded-breaks';
import type { RecordedBreak } from '@cairn/evidence/recorded-breaks';
import type { ChainCheck } from './verify-chain.js';

export type BadgeState =
  | { kind: 'checking' }
  | { kind: 'unavailable' }
  | {
      kind: 'checked';
      check: ChainCheck;
      serverHeadHash: string | null;
      /** The first break the chain records of itself (ADR 0033), when its receipts verify. */
      recordedBreak: RecordedBreak | null;
    };

/** What the badge shows: `chain` is its `data-chain` state, for tests and scripts. */
export interface BadgeView {
  chain: 'checking' | 'unavailable' | 'broken' | 'break-recorded' | 'head-mismatch' | 'verified';
  tone: 'muted' | 'bad' | 'ok';
  mark: string | null;
  text: string;
  title: string | undefined;
  /** A recorded break's seq (`data-break-seq`). */
  breakSeq: number | undefined;
}

/**
 * The badge's state once this browser checked `receipts`: the server's head hash is compared only
 * when its projection holds exactly as many receipts, and receipts that verify may still record
 * that their chain was broken (ADR 0033).
 */
export function checkedBadge(check: ChainCheck, receipts: readonly unknown[], server: { count: number; hash: string } | null): BadgeState {
  return {
    kind: 'checked',
    check,
    serverHeadHash: server !== null && server.count === receipts.length ? server.hash : null,
    recordedBreak: check.ok ? (recordedBreaksOf(receipts)[0] ?? null) : null,
  };
}

/**
 * The badge's state as people read it. Green only when this browser recomputed every receipt's
 * hash from genesis, the chain records no break of its own (a critical `alert.raised`
 * E_CHAIN_BROKEN: a message on it was no receipt, so every receipt verifies and the chain itself
 * says it was broken — `cairn verify`'s `break_recorded`), and, when the server's projection has
 * as many receipts, its head hash agrees. Red at the first receipt that does not hold, else at
 * the recorded break.
 */
export function chainBadgeView(state: BadgeState): BadgeView {
  const none = { mark: null, title: undefined, breakSeq: undefined };
  if (state.kind === 'checking') return { ...none, chain: 'checking', tone: 'muted', text: 'Checking chain…' };
  if (state.kind === 'unavailable') {
    return { ...none, chain: 'unavailable', tone: 'muted', text: 'Chain not checked: this page is not in a secure context (use HTTPS or localhost)', title: 'WebCrypto needs HTTPS or localhost' };
  }
  const { check, serverHeadHash, recordedBreak } = state;
  if (!check.ok) {
    return { ...none, chain: 'broken', tone: 'bad', mark: '✗', text: `Chain broken at receipt #${check.firstBadSeq}: ${check.reason.replace(/_/g, ' ')} — ${check.message}`, title: check.message };
  }
  if (recordedBreak !== null) {
    return {
      chain: 'break-recorded',
      tone: 'bad',
      mark: '✗',
      text: `Chain broken: the receipts verify, but receipt #${recordedBreak.seq} records that the chain was broken — ${recordedBreak.message}`,
      title: recordedBreak.message,
      breakSeq: recordedBreak.seq,
    };
  }
  if (serverHeadHash !== null && serverHeadHash !== check.headHash) {
    return { ...none, chain: 'head-mismatch', tone: 'bad', mark: '✗', text: `The receipts verify, but the server reports another head hash (${serverHeadHash.slice(0, 12)}…)` };
  }
  return { ...none, chain: 'verified', tone: 'ok', mark: '✓', text: `Chain verified in this browser: ${check.count} receipts, head ${check.headHash.slice(0, 12)}…`, title: `head ${check.headHash}` };
}
