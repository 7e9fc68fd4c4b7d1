import type { EvidenceReceipt, RunState } from '@cairn/contracts';
import { parseEvidenceReceipt } from '@cairn/contracts';
import { verifyChain } from '@cairn/evidence';
import { foldRun, isTerminal, splitAttempts } from '@cairn/lifecycle';

/**
 * The fault suite's invariants (issue 18, docs/testing.md "The fault matrix"):
 * L — nothing acknowledged is lost; D — no double effect; C — every chain verifies;
 * T — exactly one terminal state per run; R — nothing left behind; P — projections equal a rebuild.
 * D is per attempt (ADR 0035): a run retried after a lost worker runs its steps again in its next
 * attempt, once; within one attempt nothing is done twice.
 */
export const INVARIANTS = ['L', 'D', 'C', 'T', 'R', 'P'] as const;
export type Invariant = (typeof INVARIANTS)[number];

export const INVARIANT_NAMES: Readonly<Record<Invariant, string>> = {
  L: 'nothing acknowledged is lost',
  D: 'no double effect',
  C: 'every chain verifies',
  T: 'exactly one terminal state per run',
  R: 'nothing left behind',
  P: 'projections equal a fresh rebuild',
};

export interface InvariantResult {
  /** False when the input it needs was not given (then `ok` says nothing). */
  checked: boolean;
  ok: boolean;
  findings: string[];
}

export interface InvariantReport {
  ok: boolean;
  invariants: Record<Invariant, InvariantResult>;
  /** Chains looked at, by chain id, with their receipt count. */
  chains: Record<string, number>;
}

/** What was left once the scenario ended: each entry names one thing (a container name, a lease key, …). */
export interface Leftovers {
  containers: readonly string[];
  networks: readonly string[];
  leases: readonly string[];
  queueEntries: readonly string[];
}

/** Everything the checker judges; gathered from a real stack by `observeStack`, or made by hand in unit tests. */
export interface InvariantInput {
  /** Every chain of the test's evidence stream, as stored (raw receipts, in order), by chain id. */
  chains: ReadonlyMap<string, readonly unknown[]>;
  /** Chain ids the system acknowledged (a 202, a command reply, an append that returned). */
  acknowledged: readonly string[];
  /** Run chains that must have ended (default: every acknowledged `run_…` chain). */
  mustEnd?: readonly string[];
  /** Containers created for a chain while the scenario ran (engine events), by chain id. Absent: D counts receipts only. */
  containersCreated?: ReadonlyMap<string, readonly string[]>;
  /** Absent: R is not checked. */
  leftovers?: Leftovers;
  /** The live projection rows and those of a fresh rebuild, table by table. Absent: P is not checked. */
  projections?: { live: Readonly<Record<string, readonly unknown[]>>; rebuilt: Readonly<Record<string, readonly unknown[]>> };
}

/** Receipts that end a run however far it got. */
const ENDING_TYPES: ReadonlySet<string> = new Set(['run.failed', 'run.rolled_back', 'run.cancelled']);
/** What may follow a run's terminal state: its seal, and the record of a teardown or an alert about what happened. */
const AFTER_END: ReadonlySet<string> = new Set(['run.sealed', 'sandbox.destroyed', 'alert.raised']);

export function checkInvariants(input: InvariantInput): InvariantReport {
  const results: Record<Invariant, InvariantResult> = {
    L: checkLost(input),
    D: checkDoubles(input),
    C: checkChains(input),
    T: checkTerminal(input),
    R: checkLeftovers(input),
    P: checkProjections(input),
  };
  const chains = Object.fromEntries([...input.chains].map(([id, receipts]) => [id, receipts.length]));
  return { ok: INVARIANTS.every((name) => results[name].ok), invariants: results, chains };
}

/** The report as a test prints it: one line per invariant, its findings indented under it. */
export function formatReport(report: InvariantReport): string {
  const lines = [`invariants: ${report.ok ? 'all hold' : 'VIOLATED'} (${Object.keys(report.chains).length} chains)`];
  for (const name of INVARIANTS) {
    const result = report.invariants[name];
    const verdict = !result.checked ? 'not checked' : result.ok ? 'ok' : 'FAILED';
    lines.push(`  ${name} ${INVARIANT_NAMES[name]}: ${verdict}`);
    for (const finding of result.findings) lines.push(`      - ${finding}`);
  }
  return lines.join('\n');
}

function result(findings: string[], checked = true): InvariantResult {
  return { checked, ok: findings.length === 0, findings };
}

function parsed(raw: readonly unknown[]): EvidenceReceipt[] {
  const out: EvidenceReceipt[] = [];
  for (const receipt of raw) {
    const check = parseEvidenceReceipt(receipt);
    if (check.ok) out.push(check.receipt);
  }
  return out;
}

function checkLost(input: InvariantInput): InvariantResult {
  const findings: string[] = [];
  for (const id of input.acknowledged) {
    const chain = input.chains.get(id);
    if (chain === undefined || chain.length === 0) {
      findings.push(`${id}: acknowledged, but the log holds no chain for it`);
      continue;
    }
    const first = chain[0] as { seq?: unknown; type?: unknown };
    const genesis = id.startsWith('sbx_') ? 'sandbox.requested' : 'run.submitted';
    if (first.seq !== 1 || (id.startsWith('run_') && first.type !== genesis) || (id.startsWith('sbx_') && first.type !== genesis)) {
      findings.push(`${id}: the chain does not start with its ${genesis} at seq 1 (found ${String(first.type)} at ${String(first.seq)})`);
    }
  }
  return result(findings);
}

function checkDoubles(input: InvariantInput): InvariantResult {
  const findings: string[] = [];
  for (const [id, raw] of input.chains) {
    const chain = parsed(raw);
    const placements = Math.max(1, chain.filter((r) => r.type === 'run.scheduled').length);
    // Per attempt (ADR 0035; a lease re-offered before any step ran is the same attempt): one
    // sandbox, each step started and completed once. An attempt ends at its run.retried.
    const attemptStarts = new Set(splitAttempts(chain).lost.map((lost) => lost.receipts.at(-1)!.seq));
    let created = 0;
    let started = new Set<number>();
    let completed = new Set<number>();
    const destroyed = new Set<string>();
    const execs = new Set<string>();
    for (const receipt of chain) {
      switch (receipt.type) {
        case 'run.retried':
          if (!attemptStarts.has(receipt.seq)) break;
          created = 0;
          started = new Set();
          completed = new Set();
          break;
        case 'sandbox.created':
          created += 1;
          if (created > 1) findings.push(`${id}: a second sandbox.created (${receipt.container_name}) for one attempt, at seq ${receipt.seq}`);
          break;
        case 'step.started':
          if (started.has(receipt.step_index)) findings.push(`${id}: step ${receipt.step_index} started twice (again at seq ${receipt.seq})`);
          started.add(receipt.step_index);
          break;
        case 'step.completed':
          if (completed.has(receipt.step_index)) findings.push(`${id}: step ${receipt.step_index} completed twice (again at seq ${receipt.seq})`);
          completed.add(receipt.step_index);
          break;
        case 'sandbox.destroyed':
          if (destroyed.has(receipt.container_name)) findings.push(`${id}: sandbox ${receipt.container_name} destroyed twice on the record (again at seq ${receipt.seq})`);
          destroyed.add(receipt.container_name);
          break;
        case 'sandbox.exec.started':
          if (execs.has(receipt.exec_id)) findings.push(`${id}: exec ${receipt.exec_id} started twice (again at seq ${receipt.seq})`);
          execs.add(receipt.exec_id);
          break;
        default:
          break;
      }
    }
    const endings = chain.filter((r) => ENDING_TYPES.has(r.type));
    if (endings.length > 1) findings.push(`${id}: ${endings.length} ending receipts (${endings.map((r) => `${r.type}@${r.seq}`).join(', ')})`);
    const seals = chain.filter((r) => r.type === 'run.sealed');
    if (seals.length > 1) findings.push(`${id}: sealed ${seals.length} times (seqs ${seals.map((r) => r.seq).join(', ')})`);
    const containers = input.containersCreated?.get(id) ?? [];
    if (containers.length > placements) {
      findings.push(`${id}: ${containers.length} containers created (${containers.join(', ')}) for ${placements} placement(s)`);
    }
  }
  for (const [id, containers] of input.containersCreated ?? []) {
    if (!input.chains.has(id) && containers.length > 0) findings.push(`${id}: containers created (${containers.join(', ')}) for a chain the log does not hold`);
  }
  return result(findings);
}

function checkChains(input: InvariantInput): InvariantResult {
  const findings: string[] = [];
  for (const [id, raw] of input.chains) {
    const verdict = verifyChain(raw, { chainId: id });
    if (!verdict.ok) findings.push(`${id}: ${verdict.code} at seq ${verdict.firstBadSeq} (${verdict.reason}): ${verdict.message}`);
    const unreadable = raw.filter((r) => !parseEvidenceReceipt(r).ok).length;
    if (unreadable > 0) findings.push(`${id}: ${unreadable} receipt(s) break their contract`);
  }
  return result(findings);
}

function checkTerminal(input: InvariantInput): InvariantResult {
  const findings: string[] = [];
  const mustEnd = new Set(input.mustEnd ?? input.acknowledged.filter((id) => id.startsWith('run_')));
  for (const [id, raw] of input.chains) {
    if (!id.startsWith('run_')) continue;
    const chain = parsed(raw);
    // The first receipt at which the fold reaches a terminal state; what follows may only close it.
    let ended: { seq: number; state: RunState; type: string } | null = null;
    for (let i = 0; i < chain.length && ended === null; i++) {
      const view = foldRun(chain.slice(0, i + 1));
      const receipt = chain[i]!;
      if (view !== null && isTerminal(view.state)) ended = { seq: receipt.seq, state: view.state, type: receipt.type };
    }
    if (ended === null) {
      if (mustEnd.has(id)) findings.push(`${id}: never reached a terminal state (last: ${chain.at(-1)?.type ?? 'nothing'})`);
      continue;
    }
    const after = chain.filter((r) => r.seq > ended.seq);
    for (const receipt of after) {
      if (ENDING_TYPES.has(receipt.type)) findings.push(`${id}: a second ending, ${receipt.type} by ${receipt.actor} at seq ${receipt.seq}, after ${ended.type} at seq ${ended.seq} (${ended.state})`);
      else if (!AFTER_END.has(receipt.type)) findings.push(`${id}: ${receipt.type} by ${receipt.actor} at seq ${receipt.seq}, after the run ended ${ended.state} at seq ${ended.seq}`);
    }
    const final = foldRun(chain);
    if (final !== null && final.state !== ended.state) findings.push(`${id}: ended ${ended.state} at seq ${ended.seq}, but its chain now folds to ${final.state}`);
  }
  return result(findings);
}

function checkLeftovers(input: InvariantInput): InvariantResult {
  if (input.leftovers === undefined) return result([], false);
  const { containers, networks, leases, queueEntries } = input.leftovers;
  return result([
    ...containers.map((name) => `container left: ${name}`),
    ...networks.map((name) => `network left: ${name}`),
    ...leases.map((key) => `lease left: ${key}`),
    ...queueEntries.map((key) => `placement queue entry left: ${key}`),
  ]);
}

function checkProjections(input: InvariantInput): InvariantResult {
  if (input.projections === undefined) return result([], false);
  const { live, rebuilt } = input.projections;
  const findings: string[] = [];
  for (const table of new Set([...Object.keys(live), ...Object.keys(rebuilt)])) {
    const a = (live[table] ?? []).map((row) => JSON.stringify(row));
    const b = (rebuilt[table] ?? []).map((row) => JSON.stringify(row));
    if (a.length !== b.length) findings.push(`${table}: ${a.length} live rows, ${b.length} rebuilt`);
    const differing = a.findIndex((row, i) => row !== b[i]);
    if (differing >= 0) findings.push(`${table}: row ${differing} differs: live ${a[differing]?.slice(0, 300)} ≠ rebuilt ${b[differing]?.slice(0, 300) ?? 'none'}`);
  }
  return result(findings);
}
