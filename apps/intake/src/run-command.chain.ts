import { CairnError, parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt, ReceiptEnvelope } from '@cairn/contracts';
import { isHeadMoved } from '@cairn/evidence-log';
import type { EvidenceLog } from '@cairn/evidence-log';
import { foldRun } from '@cairn/lifecycle';
import type { RunView } from '@cairn/lifecycle';

/** Reads of the chain before a run that keeps moving under a decision is answered E_CONFLICT. */
const MAX_READS = 5;

/** A run as a command on it (cancel, approve) decides from it: read once, appended onto `headSeq`. */
export interface CommandedRun {
  view: RunView;
  /** The receipts that meet their contracts. */
  receipts: EvidenceReceipt[];
  headSeq: number;
}

/** The tenant's run as stored now; another tenant's run is E_NOT_FOUND, like one that does not exist. */
export async function readCommandedRun(log: EvidenceLog, runId: string, tenant: string): Promise<CommandedRun> {
  const raw: ReceiptEnvelope[] = [];
  for await (const stored of log.readChain(runId)) raw.push(stored.receipt);
  const view = foldRun(raw);
  if (view === null || view.tenant !== tenant) throw new CairnError('E_NOT_FOUND', `no run ${runId}`, { runId });
  const receipts = raw.flatMap((r): EvidenceReceipt[] => {
    const parsed = parseEvidenceReceipt(r);
    return parsed.ok ? [parsed.receipt] : [];
  });
  return { view, receipts, headSeq: raw.at(-1)?.seq ?? 0 };
}

/**
 * Runs a read-decide-append again while another writer moved the head under it (docs/adr/0003),
 * up to `MAX_READS` reads; then the head-moved conflict is the answer.
 */
export async function decideOnStableHead<T>(decideAndAppend: () => Promise<T>): Promise<T> {
  for (let reads = 1; ; reads++) {
    try {
      return await decideAndAppend();
    } catch (error) {
      if (!isHeadMoved(error) || reads >= MAX_READS) throw error;
    }
  }
}
