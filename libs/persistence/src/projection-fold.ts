import { GENESIS_HASH } from '@cairn/contracts';
import { evolveRun, evolveSandbox } from '@cairn/lifecycle';
import type { RunView } from '@cairn/lifecycle';
import { traceIdOf } from '@cairn/tracing';
import { POISON_RAW_LIMIT } from './poison-reason.constants.js';
import type { PoisonReason } from './poison-reason.constants.js';
import { checkReceipt } from './receipt-check.js';
import type { SandboxRow } from './sandbox-row.mapper.js';

/** One stream message as the projections read it (what `EvidenceLog.readAll` and a consumer yield). */
export interface RawEvidenceMessage {
  readonly streamSeq: number;
  readonly subject: string;
  readonly data: Uint8Array;
  /**
   * The message's `traceparent` header as carried (null without one): no part of the receipt, but
   * stored with it on the stream, so a rebuild reads the same one the live projector did (ADR 0031).
   * Only a run's first message is asked for it, so a source may read it lazily.
   */
  readonly traceparent: string | null;
}

/** The last projected receipt of a chain: what the next one must link to. */
export interface ChainHead {
  readonly seq: number;
  readonly hash: string;
  readonly tenant: string;
}

export interface EvidenceEventRow {
  readonly streamSeq: number;
  readonly chainId: string;
  readonly seq: number;
  readonly type: string;
  readonly tenant: string;
  readonly actor: string;
  /** RFC 3339 UTC with milliseconds, exactly as in the receipt. */
  readonly ts: string;
  readonly causation: string | null;
  readonly prevHash: string;
  readonly hash: string;
  /** The receipt's JSON text as stored on the stream. */
  readonly receiptJson: string;
}

export interface PoisonRow {
  readonly streamSeq: number;
  readonly subject: string;
  readonly chainId: string | null;
  readonly reason: PoisonReason;
  readonly detail: string;
  /** At most `POISON_RAW_LIMIT` bytes of the message. */
  readonly raw: Uint8Array;
  readonly rawLength: number;
}

export interface RunRow {
  readonly view: RunView;
  readonly lastStreamSeq: number;
  /** The trace id of the run's `run.submitted` message's `traceparent`; null when it carried none. */
  readonly traceId: string | null;
}

export type FoldOutcome =
  | { readonly kind: 'event'; readonly event: EvidenceEventRow; readonly run: RunRow | null; readonly sandbox: SandboxRow | null }
  | { readonly kind: 'poison'; readonly poison: PoisonRow };

/**
 * The projections' decision for each message, in stream order, with no IO: the live writer seeds
 * it with the heads and runs of the chains in its batch, a rebuild starts it empty. Both feed it
 * the same messages in the same order, so both reach the same rows (I-10).
 *
 * A message is projected only if it is a valid receipt that continues its chain (seq = head + 1,
 * prev_hash = head hash, same tenant). Anything else is poison: recorded, and it changes no chain,
 * so it never reaches `evidence_events`, `runs` or `sandboxes`.
 */
export class ProjectionFold {
  private readonly heads = new Map<string, ChainHead>();
  private readonly runs = new Map<string, RunRow>();
  private readonly sandboxes = new Map<string, SandboxRow>();

  constructor(private readonly subjectPrefix: string) {}

  seedHead(chainId: string, head: ChainHead): void {
    this.heads.set(chainId, head);
  }

  seedRun(row: RunRow): void {
    this.runs.set(row.view.runId, row);
  }

  seedSandbox(row: SandboxRow): void {
    this.sandboxes.set(row.view.id, row);
  }

  get runCount(): number {
    return this.runs.size;
  }

  allRuns(): IterableIterator<RunRow> {
    return this.runs.values();
  }

  get sandboxCount(): number {
    return this.sandboxes.size;
  }

  allSandboxes(): IterableIterator<SandboxRow> {
    return this.sandboxes.values();
  }

  apply(message: RawEvidenceMessage): FoldOutcome {
    const check = checkReceipt(message.subject, message.data, this.subjectPrefix);
    if (!check.ok) return poison(message, check.chainId, check.reason, check.detail);
    const { chainId, receipt } = check;
    if (receipt.run_id !== chainId) {
      return poison(message, chainId, 'chain_id_mismatch', `run_id ${receipt.run_id} on the subject of ${chainId}`);
    }
    const head = this.heads.get(chainId);
    const expectedSeq = (head?.seq ?? 0) + 1;
    if (receipt.seq < expectedSeq) {
      return poison(message, chainId, 'duplicate_seq', `seq ${receipt.seq}: the chain's head is already at seq ${expectedSeq - 1}`);
    }
    if (receipt.seq > expectedSeq) {
      return poison(message, chainId, 'seq_gap', `seq ${receipt.seq}: the chain expects seq ${expectedSeq}`);
    }
    const expectedPrev = head?.hash ?? GENESIS_HASH;
    if (receipt.prev_hash !== expectedPrev) {
      return poison(message, chainId, 'prev_hash_mismatch', `prev_hash ${receipt.prev_hash} is not the head's hash ${expectedPrev}`);
    }
    if (head !== undefined && receipt.tenant !== head.tenant) {
      return poison(message, chainId, 'tenant_mismatch', `tenant ${receipt.tenant} on a chain of tenant ${head.tenant}`);
    }
    let run: RunRow | null = null;
    if (chainId.startsWith('run_')) {
      const previous = this.runs.get(chainId);
      try {
        run = { view: evolveRun(previous?.view ?? null, receipt), lastStreamSeq: message.streamSeq, traceId: previous === undefined ? submissionTraceId(receipt.type, message) : previous.traceId };
      } catch (error) {
        return poison(message, chainId, 'lifecycle_error', error instanceof Error ? error.message : String(error));
      }
      this.runs.set(chainId, run);
    }
    let sandbox: SandboxRow | null = null;
    if (chainId.startsWith('sbx_')) {
      try {
        sandbox = { view: evolveSandbox(this.sandboxes.get(chainId)?.view ?? null, receipt), lastStreamSeq: message.streamSeq };
      } catch (error) {
        return poison(message, chainId, 'lifecycle_error', error instanceof Error ? error.message : String(error));
      }
      this.sandboxes.set(chainId, sandbox);
    }
    this.heads.set(chainId, { seq: receipt.seq, hash: receipt.hash, tenant: receipt.tenant });
    const event: EvidenceEventRow = {
      streamSeq: message.streamSeq,
      chainId,
      seq: receipt.seq,
      type: receipt.type,
      tenant: receipt.tenant,
      actor: receipt.actor,
      ts: receipt.ts,
      causation: receipt.causation,
      prevHash: receipt.prev_hash,
      hash: receipt.hash,
      receiptJson: check.text,
    };
    return { kind: 'event', event, run, sandbox };
  }
}

/**
 * The trace a run belongs to is the one its submission was made in: the `traceparent` of the
 * `run.submitted` message that starts its chain. Every later receipt carries a span of that same
 * trace, or none (a service with tracing off), and changes nothing. A malformed header is no trace id.
 */
export function submissionTraceId(type: string, message: Pick<RawEvidenceMessage, 'traceparent'>): string | null {
  return type === 'run.submitted' ? traceIdOf(message.traceparent) : null;
}

function poison(message: RawEvidenceMessage, chainId: string | null, reason: PoisonReason, detail: string): FoldOutcome {
  const raw = message.data.byteLength > POISON_RAW_LIMIT ? message.data.subarray(0, POISON_RAW_LIMIT) : message.data;
  return {
    kind: 'poison',
    poison: {
      streamSeq: message.streamSeq,
      subject: message.subject,
      chainId,
      reason,
      detail,
      raw,
      rawLength: message.data.byteLength,
    },
  };
}
