import { parseEvidenceReceipt, ReceiptEnvelopeSchema } from '@cairn/contracts';
import type { EvidenceReceipt, ReceiptEnvelope } from '@cairn/contracts';
import { foldRun } from './evolve-run.js';
import type { RunView } from './evolve-run.js';

/** A run's chain as a reaction sees it: the receipts that meet their contracts, and the run's state. */
export type RunChain = {
  receipts: EvidenceReceipt[];
  /** Seqs of receipts that break their contract (or have a type Cairn does not know). */
  invalidSeqs: number[];
  view: RunView | null;
};

/**
 * Parses a chain as read from the log. A receipt that breaks its contract is folded as an unknown
 * event — the run is FAILED with E_UNKNOWN_STATE (I-5) — rather than hiding the chain, so the
 * services that end and seal runs still see how it ended. Null only when an item is not even a
 * receipt envelope (the log's `readChain` refuses those itself).
 */
export function readRunChain(raw: readonly unknown[]): RunChain | null {
  return readChainWith(raw, foldRun);
}

/**
 * A chain parsed for any fold (a run's, a sandbox's): the receipts that meet their contracts, the
 * seqs of those that do not — folded as `<type>.invalid`, which every fold takes for an unknown
 * event — and the fold's view. Null only when an item is not even a receipt envelope.
 */
export function readChainWith<V>(raw: readonly unknown[], fold: (receipts: readonly (EvidenceReceipt | ReceiptEnvelope)[]) => V): { receipts: EvidenceReceipt[]; invalidSeqs: number[]; view: V } | null {
  const receipts: EvidenceReceipt[] = [];
  const folded: (EvidenceReceipt | ReceiptEnvelope)[] = [];
  const invalidSeqs: number[] = [];
  for (const item of raw) {
    const parsed = parseEvidenceReceipt(item);
    if (parsed.ok) {
      receipts.push(parsed.receipt);
      folded.push(parsed.receipt);
      continue;
    }
    const envelope = ReceiptEnvelopeSchema.safeParse(item);
    if (!envelope.success) return null;
    invalidSeqs.push(envelope.data.seq);
    folded.push({ ...envelope.data, type: `${envelope.data.type}.invalid` });
  }
  return { receipts, invalidSeqs, view: fold(folded) };
}

/** A chain in which every receipt meets its contract. */
export type ValidRunChain = Omit<RunChain, 'invalidSeqs'>;

/**
 * The strict reading, for services that decide what happens next (policy, scheduler): null when
 * any receipt breaks its contract — a chain a service cannot fully read is not acted on (the
 * verifier and the projector report it).
 */
export function readValidRunChain(raw: readonly unknown[]): ValidRunChain | null {
  const chain = readRunChain(raw);
  if (chain === null || chain.invalidSeqs.length > 0) return null;
  return { receipts: chain.receipts, view: chain.view };
}
