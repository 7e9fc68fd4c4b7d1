/*
 * Breaks a chain records of itself (ADR 0033). A message on a chain's subjects that is no receipt
 * (a poison message) is no part of the hash chain: the receipts around it still verify, so a
 * bundle or chain file — which holds receipts only — recomputes from genesis. What says the
 * chain was broken is the chain itself: a critical `alert.raised` E_CHAIN_BROKEN that the service
 * meeting the break appended. Every verifier (`cairn verify`, the MCP verify tools, the
 * dashboard's chain badge) reads these and never reports such a chain as verified.
 *
 * Pure and browser-safe: no node: import (the dashboard bundles it through the
 * `@cairn/evidence/recorded-breaks` subpath, without the node:crypto hashing of the package root).
 */

/** Where a chain records it was broken: the seq of the alert that says so, and what it says. */
export interface RecordedBreak {
  seq: number;
  message: string;
}

/** A receipt recording that its chain was broken (a critical `alert.raised` E_CHAIN_BROKEN), else null. */
export function recordedBreakOf(value: unknown): RecordedBreak | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const r = value as { type?: unknown; severity?: unknown; error_code?: unknown; seq?: unknown; message?: unknown };
  if (r.type !== 'alert.raised' || r.severity !== 'critical' || r.error_code !== 'E_CHAIN_BROKEN') return null;
  // A seq that is no chain position cannot name where; such a receipt never verifies anyway.
  if (typeof r.seq !== 'number' || !Number.isSafeInteger(r.seq) || r.seq < 1) return null;
  return { seq: r.seq, message: typeof r.message === 'string' ? r.message : '' };
}

/** Every break `receipts` record of themselves, in chain order (the first is where to look). */
export function recordedBreaksOf(receipts: readonly unknown[]): RecordedBreak[] {
  return receipts.flatMap((receipt) => {
    const recorded = recordedBreakOf(receipt);
    return recorded === null ? [] : [recorded];
  });
}
