import { parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt } from '@cairn/contracts';
import { foldRun } from '@cairn/lifecycle';
import type { RunView } from '@cairn/lifecycle';

/** A run's chain as a reaction sees it: every receipt parsed, and the run's state folded from them. */
export interface RunChain {
  receipts: EvidenceReceipt[];
  view: RunView | null;
}

/**
 * Parses the receipts `readChain` returned; null when one does not validate — a chain the service
 * cannot read is not acted on (the verifier and the projector report it).
 */
export function runChainOf(raw: readonly unknown[]): RunChain | null {
  const receipts: EvidenceReceipt[] = [];
  for (const item of raw) {
    const parsed = parseEvidenceReceipt(item);
    if (!parsed.ok) return null;
    receipts.push(parsed.receipt);
  }
  return { receipts, view: foldRun(receipts) };
}
