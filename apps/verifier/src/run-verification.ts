import { gatePatchStepIndex } from '@cairn/contracts';
import type { EventType, EvidenceEventOf, EvidenceReceipt, EvidenceReceiptOf, RunSpec, Verdict } from '@cairn/contracts';
import { canonicalJson } from '@cairn/evidence';
import type { ChainVerification } from '@cairn/evidence';
import { boundDetail, judgeClaim, judgeGate, verifyRunEvidence } from '@cairn/judgement';
import type { GateJudgement, JudgementContext } from '@cairn/judgement';
import { isTerminal } from '@cairn/lifecycle';
import type { RunView } from '@cairn/lifecycle';
import { judgementContextOf, recordedRunOf, runFacts } from '@cairn/service-kit';
import type { LoadedArtifact, RecordedRun, RunFacts } from '@cairn/service-kit';

type EnvelopeKey = 'v' | 'seq' | 'run_id' | 'tenant' | 'type' | 'actor' | 'ts' | 'causation';
/** What the verifier hands to `append` for an event of type `T`: its own fields, no envelope. */
export type EventFields<T extends EventType> = Omit<EvidenceEventOf<T>, EnvelopeKey>;

/** One entry of `verification.completed`'s `invariants`. */
export type InvariantResult = { id: string; ok: boolean; detail: string };

type VerifiedChain = Extract<ChainVerification, { ok: true }>;
type BrokenChain = Extract<ChainVerification, { ok: false }>;

/**
 * The sha256 the stored bytes hash to, for each recorded sha256 whose bytes could be read: itself
 * when they are intact, another when they are corrupt. Missing or unread bytes have no entry.
 */
export function rehashedArtifacts(loaded: ReadonlyMap<string, LoadedArtifact>): Map<string, string> {
  const rehashed = new Map<string, string>();
  for (const [sha, artifact] of loaded) {
    if (artifact.state === 'ok') rehashed.set(sha, sha);
    else if (artifact.state === 'corrupt') rehashed.set(sha, artifact.actual);
  }
  return rehashed;
}

export function chainInvariant(chain: VerifiedChain): InvariantResult {
  return { id: 'chain', ok: true, detail: `${chain.count} receipts recomputed from genesis; head ${chain.headHash}` };
}

/** Each step's stdout and stderr, as recorded by hash, are in the store and hash to their names. */
export function stepOutputInvariant(run: RecordedRun, loaded: ReadonlyMap<string, LoadedArtifact>): InvariantResult {
  const problems: string[] = [];
  let checked = 0;
  for (const step of run.steps) {
    for (const [stream, sha] of [
      ['stdout', step.stdout_sha256],
      ['stderr', step.stderr_sha256],
    ] as const) {
      checked++;
      const artifact = loaded.get(sha) ?? { state: 'missing' };
      const where = `steps[${step.step_index}].${stream} (${sha})`;
      if (artifact.state === 'missing') problems.push(`${where} is not in the artifact store`);
      else if (artifact.state === 'corrupt') problems.push(`${where} hashes to ${artifact.actual}`);
      else if (artifact.state === 'too_large') problems.push(`${where} is ${artifact.bytes} bytes, past the read bound`);
    }
  }
  if (problems.length === 0) return { id: 'step_output_rehashed', ok: true, detail: `${checked} step outputs recomputed and equal` };
  return { id: 'step_output_rehashed', ok: false, detail: boundDetail(`${problems.length} of ${checked}: ${problems.join('; ')}`) };
}

/** The kernel's facts equal the facts recomputed here from the same receipts and bytes. */
export function factsInvariant(recorded: Readonly<Record<string, unknown>> | null, recomputed: RunFacts): InvariantResult {
  if (recorded === null) return { id: 'facts_recomputed', ok: false, detail: 'no kernel.facts on the chain' };
  const again: Readonly<Record<string, unknown>> = recomputed;
  const keys = [...new Set([...Object.keys(recorded), ...Object.keys(again)])].sort();
  const same = (key: string): boolean =>
    Object.hasOwn(recorded, key) && Object.hasOwn(again, key) && canonicalJson(recorded[key]) === canonicalJson(again[key]);
  const differ = keys.filter((key) => !same(key));
  if (differ.length === 0) return { id: 'facts_recomputed', ok: true, detail: 'the kernel facts equal the facts recomputed from the stored bytes' };
  return { id: 'facts_recomputed', ok: false, detail: boundDetail(`the kernel facts differ from the recomputed ones in: ${differ.join(', ')}`) };
}

/**
 * The claim's verdict, unless an invariant failed: evidence that does not hold together cannot
 * support a claim, so SUPPORTS becomes INCONCLUSIVE. A refutation (REJECTED) stands.
 */
export function overallVerdict(claim: Verdict, invariants: readonly InvariantResult[]): Verdict {
  if (invariants.every((i) => i.ok)) return claim;
  return claim === 'SUPPORTS' ? 'INCONCLUSIVE' : claim;
}

/**
 * The verifier's judgement of a run whose chain verified from genesis: its invariants (the
 * chain; every step receipted, caps honoured, teardown verified, artifacts and step outputs
 * re-hashed; the kernel's facts recomputed) and its claim, judged against the facts recomputed
 * here and the bytes that re-hashed — trusting nothing but the chain and the bytes.
 */
export function verifyRun(chain: VerifiedChain, receipts: readonly EvidenceReceipt[], loaded: ReadonlyMap<string, LoadedArtifact>): EventFields<'verification.completed'> {
  const run = recordedRunOf(receipts);
  const facts = runFacts(run, loaded);
  const kernel = receipts.find((r): r is EvidenceReceiptOf<'kernel.facts'> => r.type === 'kernel.facts');
  const invariants: InvariantResult[] = [
    chainInvariant(chain),
    ...verifyRunEvidence(receipts, rehashedArtifacts(loaded)),
    stepOutputInvariant(run, loaded),
    factsInvariant(kernel?.facts ?? null, facts),
  ];
  const spec = receipts.find((r): r is EvidenceReceiptOf<'run.submitted'> => r.type === 'run.submitted')?.spec;
  const context = judgementContextOf(run, loaded, facts);
  const claim = judgeClaim(spec?.claim?.checks ?? [], context);
  const gate = spec === undefined ? null : runGate(spec, context);
  return {
    verdict: overallVerdict(claim.verdict, invariants),
    chain_ok: true,
    head_hash: chain.headHash,
    receipts_checked: chain.count,
    invariants: invariants.map(({ id, ok, detail }) => ({ id, ok, detail })),
    checks: claim.checks.map(({ id, outcome, detail }) => ({ id, outcome, detail })),
    ...(gate === null ? {} : { gate }),
    ...(gate === null || gate.passed ? {} : { error_code: 'E_GATE_FAIL' as const }),
  };
}

/**
 * The spec's regression gate judged against the recomputed facts and the re-hashed bytes
 * (docs/adr/0004); null when the spec has none. A gate whose patch step names no step cannot
 * have passed intake; should one reach here, it fails closed as a gate on a step that never ran.
 */
export function runGate(spec: RunSpec, context: JudgementContext): GateJudgement | null {
  if (spec.gate === undefined) return null;
  const patchStep = gatePatchStepIndex(spec.gate, spec.steps);
  if (patchStep === null) {
    const where = typeof spec.gate.patchStep === 'number' ? spec.gate.patchStep : 0;
    const judged = judgeGate({ patchStep: where, patch: spec.gate.patch, checks: spec.gate.checks }, context);
    const detail = boundDetail(`the patch is rejected: the gate's patch step ${JSON.stringify(spec.gate.patchStep)} names no single step of the spec`);
    return { ...judged, passed: false, patch: { ...judged.patch, rejected: true }, detail };
  }
  return judgeGate({ patchStep, patch: spec.gate.patch, checks: spec.gate.checks }, context);
}

/**
 * What the verifier can still put on a chain that does not verify (docs in the README):
 * - a sealed run: nothing (nothing may follow `run.sealed`, I-11); the fatal log line is all;
 * - a run that has ended (or whose fold already failed it at the break): the critical alert only;
 * - otherwise: the critical alert, then `run.failed` E_CHAIN_BROKEN, which the grader seals.
 * The alert goes first so that the seal, which follows `run.failed`, is last.
 */
export function chainBreakResponse(view: RunView | null): { alert: boolean; fail: boolean } {
  if (view === null || view.sealed) return { alert: false, fail: false };
  if (isTerminal(view.state)) return { alert: true, fail: false };
  return { alert: true, fail: true };
}

export function chainBreakMessage(broken: BrokenChain): string {
  return boundDetail(`the evidence chain does not verify from genesis: seq ${broken.firstBadSeq} ${broken.reason} (${broken.verified} receipts verified before it): ${broken.message}`);
}
