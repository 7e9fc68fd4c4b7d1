import type { EvidenceReceipt, RunState } from '@cairn/contracts';
import type { RunUsageRecord } from './budget-usage.js';

/*
 * Policy's own usage state, folded from the evidence log (docs/adr/0027): what budgets and quotas
 * are counted from, without reading any projection. Pure: the same receipts in the same stream
 * order give the same ledger, so a ledger rebuilt from the log at boot decides as the live one did.
 */

/**
 * The receipt types the ledger folds: a run's or a sandbox session's start (`run.submitted`,
 * `sandbox.requested`), what policy granted, its sandbox's creation and teardown, a lost attempt
 * given back to the queue (`run.retried`, ADR 0035), and every receipt that ends its time in
 * flight. Policy's fold skips every other type by its subject, unparsed.
 */
export const USAGE_RECEIPT_TYPES = [
  'run.submitted',
  'sandbox.requested',
  'policy.decided',
  'sandbox.created',
  'sandbox.destroyed',
  'run.executed',
  'run.failed',
  'run.retried',
  'run.rolled_back',
  'run.cancelled',
  'approval.rejected',
  'run.sealed',
] as const satisfies readonly EvidenceReceipt['type'][];

const USAGE_TYPES: ReadonlySet<string> = new Set(USAGE_RECEIPT_TYPES);

/** One run or sandbox session of a tenant, as far as its usage goes. */
export interface UsageEntry extends RunUsageRecord {
  tenant: string;
  /** The stream seq of its first receipt: "earlier" is stream order. */
  firstStreamSeq: number;
}

/** States that hold a place in flight (as `summariseUsage` counts them). */
const IN_FLIGHT: ReadonlySet<RunState> = new Set<RunState>(['SUBMITTED', 'AWAITING_APPROVAL', 'SCHEDULED', 'RUNNING']);
const DAY_MS = 86_400_000;

function reserved(caps: { memory_mib?: number; disk_mib?: number } | undefined): number | null {
  if (caps?.memory_mib === undefined || caps.disk_mib === undefined) return null;
  return caps.memory_mib + caps.disk_mib;
}

/** What one receipt does to its chain's entry (undefined: none yet); the entry returned is new. */
export function evolveUsageEntry(entry: UsageEntry | undefined, receipt: EvidenceReceipt, streamSeq: number): UsageEntry | undefined {
  if (entry === undefined) {
    // Only a chain's first receipt starts an entry; anything else of a chain never started is not usage.
    if (receipt.seq !== 1) return undefined;
    if (receipt.type === 'run.submitted' && receipt.run_id.startsWith('run_')) {
      return { runId: receipt.run_id, kind: 'run', tenant: receipt.tenant, job: receipt.spec.job ?? null, state: 'SUBMITTED', cpus: null, memoryMiB: null, startedAt: null, endedAt: null, updatedAt: receipt.ts, firstStreamSeq: streamSeq };
    }
    if (receipt.type === 'sandbox.requested' && receipt.run_id.startsWith('sbx_')) {
      // A session asked for counts in flight at once (as a run not yet started: the fail-closed side).
      return { runId: receipt.run_id, kind: 'sandbox', tenant: receipt.tenant, job: null, state: 'SCHEDULED', cpus: null, memoryMiB: null, startedAt: null, endedAt: null, updatedAt: receipt.ts, firstStreamSeq: streamSeq };
    }
    return undefined;
  }
  if (receipt.run_id !== entry.runId || receipt.tenant !== entry.tenant) return entry;
  const next: UsageEntry = { ...entry, updatedAt: receipt.ts };
  const inFlight = IN_FLIGHT.has(entry.state);
  const sandbox = entry.kind === 'sandbox';
  switch (receipt.type) {
    case 'policy.decided':
      if (!inFlight) return next;
      if (receipt.decision === 'deny') return { ...next, state: 'REJECTED' };
      return { ...next, cpus: receipt.caps?.cpus ?? null, memoryMiB: reserved(receipt.caps), ...(receipt.decision === 'hold' ? { state: 'AWAITING_APPROVAL' as const } : {}) };
    case 'sandbox.created':
      if (!inFlight) return next;
      return {
        ...next,
        state: 'RUNNING',
        startedAt: sandbox ? receipt.ts : (entry.startedAt ?? receipt.ts),
        endedAt: null,
        ...(sandbox ? { cpus: receipt.caps.cpus, memoryMiB: reserved(receipt.caps) ?? entry.memoryMiB ?? null } : {}),
      };
    case 'sandbox.destroyed':
      // A session's last receipt ends its interval; a run's teardown is its end.
      if (sandbox) return entry.state === 'RUNNING' ? { ...next, state: 'SEALED' } : next;
      return { ...next, endedAt: receipt.ts };
    case 'run.executed':
      return inFlight && !sandbox ? { ...next, state: 'EXECUTED' } : next;
    case 'run.failed': {
      if (!inFlight) return next;
      const beforeRun = entry.startedAt === null && (entry.state === 'SUBMITTED' || entry.state === 'AWAITING_APPROVAL' || entry.state === 'SCHEDULED');
      const rejected = !sandbox && beforeRun && (receipt.error_code === 'E_BUDGET' || receipt.error_code === 'E_POLICY_DENIED');
      return { ...next, state: rejected ? 'REJECTED' : 'FAILED' };
    }
    case 'run.retried':
      // Back in the queue (ADR 0035), still one run in flight, its first sandbox's start kept: the
      // time already used stays counted, and the next attempt's sandbox adds to it. Until then the
      // interval ends here (not "now"), though the lost sandbox may run on until it is reaped.
      return inFlight && !sandbox ? { ...next, state: 'SUBMITTED' } : next;
    case 'run.rolled_back':
      return inFlight ? { ...next, state: 'ROLLBACK' } : next;
    case 'run.cancelled':
      if (!inFlight) return next;
      return { ...next, state: sandbox ? 'SEALED' : 'CANCELLED' };
    case 'approval.rejected':
      return inFlight && !sandbox ? { ...next, state: 'CANCELLED' } : next;
    default:
      return next;
  }
}

/**
 * Whether an entry can never count again after `nowMs`: not in flight, of no job (a job's runs
 * count for ever), and its last receipt (its sandbox's end, if it had one) more than 24 hours ago.
 * Time only moves on, so dropping these changes no later decision; an entry is kept a day after
 * its last receipt even when it never counted (a run rejected), so a late look at its chain still
 * finds it.
 */
export function usageEntryExpired(entry: UsageEntry, nowMs: number): boolean {
  if (IN_FLIGHT.has(entry.state) || entry.job !== null) return false;
  const end = Date.parse(entry.endedAt ?? entry.updatedAt);
  return Number.isFinite(end) && end < nowMs - DAY_MS && Date.parse(entry.updatedAt) < nowMs - DAY_MS;
}

/**
 * The ledger: every entry that may still count, and the stream seq of the last message folded.
 * Deterministic and without I/O — each receipt's effect is the pure `evolveUsageEntry` — but kept
 * in one mutable map, so a rebuild over the whole log stays linear.
 */
export class UsageLedger {
  private readonly byChain = new Map<string, UsageEntry>();
  private through = 0;

  /** The last stream seq folded (0: none): a chain first seen at s is decided once this reaches s. */
  get throughStreamSeq(): number {
    return this.through;
  }

  get size(): number {
    return this.byChain.size;
  }

  entry(chainId: string): UsageEntry | undefined {
    return this.byChain.get(chainId);
  }

  /**
   * Folds one message of the log at `streamSeq`: its receipt, parsed and checked, or null for a
   * message that is not one (it only moves the position). A message at or below the position is a
   * redelivery and changes nothing.
   */
  fold(receipt: EvidenceReceipt | null, streamSeq: number): void {
    if (streamSeq <= this.through) return;
    this.through = streamSeq;
    if (receipt === null || !USAGE_TYPES.has(receipt.type)) return;
    const before = this.byChain.get(receipt.run_id);
    const after = evolveUsageEntry(before, receipt, streamSeq);
    if (after === before) return;
    if (after === undefined) this.byChain.delete(receipt.run_id);
    else this.byChain.set(receipt.run_id, after);
  }

  /** Drops the entries that can never count again (`usageEntryExpired`); returns how many. */
  prune(nowMs: number): number {
    let dropped = 0;
    for (const [chainId, entry] of this.byChain) {
      if (usageEntryExpired(entry, nowMs)) {
        this.byChain.delete(chainId);
        dropped += 1;
      }
    }
    return dropped;
  }

  /**
   * The tenant's entries that count for a run of `job` decided at `nowMs`, first seen before
   * `beforeStreamSeq` (the decided chain's own first receipt): those of the job, those in flight
   * and those with sandbox time in the last 24 hours — what `summariseUsage` adds up.
   */
  earlier(tenant: string, job: string | undefined, beforeStreamSeq: number, nowMs: number): RunUsageRecord[] {
    const out: RunUsageRecord[] = [];
    const dayStart = nowMs - DAY_MS;
    for (const entry of this.byChain.values()) {
      if (entry.tenant !== tenant || entry.firstStreamSeq >= beforeStreamSeq) continue;
      const recent = entry.startedAt !== null && !(Date.parse(entry.endedAt ?? entry.updatedAt) < dayStart);
      if (!((job !== undefined && entry.job === job) || IN_FLIGHT.has(entry.state) || recent)) continue;
      const { tenant: _tenant, firstStreamSeq: _seq, ...record } = entry;
      out.push(record);
    }
    return out;
  }
}
