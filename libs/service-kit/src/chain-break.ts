import { eventId } from '@cairn/contracts';
import type { EventType, ReceiptEnvelope } from '@cairn/contracts';
import { isHeadMoved } from '@cairn/evidence-log';
import type { AppendInput, ChainBreak, EvidenceLog } from '@cairn/evidence-log';
import { isTerminal, readRunChain, readSandboxChain } from '@cairn/lifecycle';
import type { JsonLogger } from './json-logger.js';

/*
 * A chain whose subjects hold a message that is not a receipt at all — not JSON, or not the
 * receipt envelope: a poison message (ADR 0033). It is no part of the hash chain (nothing can
 * chain onto bytes that are not a receipt), so the chain is broken at it, and the run stops on
 * the record: a critical `alert.raised` E_CHAIN_BROKEN and `run.failed` E_CHAIN_BROKEN, one atomic
 * batch appended onto the last receipt before it, compare-and-set on the poison message's stream
 * seq (`pastBreaks`). Every service that meets it records the same logical events (the causation
 * is the receipt the break follows, the key names the break's stream seq), so however many meet
 * it, the break is recorded once; then the grader seals the run as any failed run.
 */

/** What a chain with messages that are not receipts needs on the record. */
export type ChainBreakDecision =
  /** No message of the chain is anything but a receipt. */
  | { kind: 'none' }
  /** The run is sealed: nothing may follow `run.sealed` (I-11); the fatal log line is all. */
  | { kind: 'sealed'; message: string }
  /** The last break is answered by an alert after it, and the run has ended: readers may go on past it. */
  | { kind: 'answered'; message: string }
  /** To record onto the last receipt (`headSeq`): the alert, and `run.failed` unless the run had ended. */
  | { kind: 'record'; headSeq: number; fail: boolean; message: string; afterSeq: number; key: string };

const MAX_MESSAGE = 2000;

/** The break in words: where it is stored, which receipt it follows, why it is not a receipt. */
export function chainBreakText(breaks: readonly ChainBreak[]): string {
  const [first] = breaks;
  if (first === undefined) return '';
  const more = breaks.length > 1 ? `; and ${breaks.length - 1} more such message(s), the last at stream seq ${breaks.at(-1)!.streamSeq}` : '';
  const text = `E_CHAIN_BROKEN: the message at stream seq ${first.streamSeq} on ${first.subject}, after seq ${first.afterSeq}, is not a receipt (${first.reason}); it is no part of the hash chain${more}`;
  return text.length <= MAX_MESSAGE ? text : `${text.slice(0, MAX_MESSAGE - 1)}…`;
}

/**
 * Decides what a chain whose log holds `breaks` needs, from its receipts (in seq order) — pure.
 * A break counts as answered once a critical `alert.raised` E_CHAIN_BROKEN follows the last one
 * and the run has ended (the alert and the failure are one batch, so one implies the other).
 */
export function decideChainBreak(chainId: string, receipts: readonly ReceiptEnvelope[], breaks: readonly ChainBreak[]): ChainBreakDecision {
  const last = breaks.at(-1);
  if (last === undefined) return { kind: 'none' };
  const message = chainBreakText(breaks);
  const ended = endedOf(chainId, receipts);
  if (ended.sealed) return { kind: 'sealed', message };
  const alerted = receipts.some((r) => r.seq > last.afterSeq && r.type === 'alert.raised' && (r as { error_code?: unknown }).error_code === 'E_CHAIN_BROKEN');
  if (alerted && ended.ended) return { kind: 'answered', message };
  const headSeq = receipts.at(-1)?.seq ?? 0;
  return { kind: 'record', headSeq, fail: !ended.ended, message, afterSeq: last.afterSeq, key: `chain-break-${last.streamSeq}` };
}

/** Whether the chain's run (or session) has ended, or is sealed, by its fold; a chain that does not fold has not ended. */
function endedOf(chainId: string, receipts: readonly ReceiptEnvelope[]): { ended: boolean; sealed: boolean } {
  if (chainId.startsWith('sbx_')) {
    const view = readSandboxChain(receipts)?.view ?? null;
    if (view === null) return { ended: false, sealed: false };
    return { ended: view.sealed || view.state === 'DESTROYED' || view.state === 'FAILED' || view.state === 'REJECTED', sealed: view.sealed };
  }
  const view = readRunChain(receipts)?.view ?? null;
  if (view === null) return { ended: false, sealed: false };
  return { ended: view.sealed || isTerminal(view.state), sealed: view.sealed };
}

export interface ChainBreakRecorder {
  log: EvidenceLog;
  /** The service recording it (the receipts' actor). */
  actor: string;
  logger: JsonLogger;
}

/** What `recordChainBreak` found and did. */
export type ChainBreakOutcome = 'none' | 'recorded' | 'answered' | 'sealed';

/**
 * Reads the chain past its breaks and records what `decideChainBreak` says (a `fatal` log line
 * whenever there is a break, as for every critical alert). A chain that moves meanwhile is read
 * and decided again. Throws what the log throws (E_UNAVAILABLE: try again later).
 */
export async function recordChainBreak(recorder: ChainBreakRecorder, chainId: string): Promise<ChainBreakOutcome> {
  const { log, actor, logger } = recorder;
  for (let reads = 1; ; reads++) {
    const past = await log.readChainPastBreaks(chainId);
    const receipts = past.receipts.map((stored) => stored.receipt);
    const decision = decideChainBreak(chainId, receipts, past.breaks);
    if (decision.kind === 'none' || decision.kind === 'answered') return decision.kind;
    if (decision.kind === 'sealed') {
      logger.write('fatal', 'evidence chain broken after its seal: a stored message is not a receipt; nothing appended', { run_id: chainId, code: 'E_CHAIN_BROKEN', message: decision.message });
      return 'sealed';
    }
    const tenant = receipts[0]?.tenant ?? '';
    const causation = eventId(chainId, decision.afterSeq);
    const input = (type: EventType, fields: Record<string, unknown>): AppendInput => ({ type, actor, tenant, causation, key: decision.key, fields });
    const inputs = [input('alert.raised', { severity: 'critical', error_code: 'E_CHAIN_BROKEN', message: decision.message })];
    if (decision.fail) inputs.push(input('run.failed', { error_code: 'E_CHAIN_BROKEN', message: decision.message }));
    try {
      await log.appendBatch(chainId, inputs, { expectedHeadSeq: decision.headSeq, pastBreaks: true });
    } catch (error) {
      if (isHeadMoved(error) && reads < 5) continue;
      throw error;
    }
    logger.write('fatal', 'evidence chain broken: a stored message is not a receipt; the run is stopped on the record', {
      run_id: chainId,
      code: 'E_CHAIN_BROKEN',
      recorded: decision.fail ? 'alert.raised, run.failed' : 'alert.raised',
      message: decision.message,
    });
    return 'recorded';
  }
}
