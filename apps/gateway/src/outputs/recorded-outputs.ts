import { CairnError, hasScope, parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt, EvidenceReceiptOf, OutputStream, Receipt } from '@cairn/contracts';
import { splitAttempts } from '@cairn/lifecycle';
import { recordedRunOf } from '@cairn/service-kit';
import type { RecordedRun } from '@cairn/service-kit';
import type { Principal } from '../auth/api-key.store.js';

/*
 * Which bytes the chain says a run (or a sandbox's exec) produced, read from its receipts with the
 * kernel's and the verifier's own reader (`recordedRunOf`): the sha256 each output must hash to
 * before it is served, and who may read it.
 */

/**
 * The receipt types an output read needs of a run's chain: with the placements and retries that
 * split it into attempts (ADR 0035), so the outputs served are the current attempt's.
 */
export const RUN_OUTPUT_RECEIPTS = ['run.submitted', 'run.scheduled', 'step.completed', 'run.retried', 'run.executed'] as const;
/** … and of a sandbox's. */
export const EXEC_OUTPUT_RECEIPTS = ['sandbox.requested', 'sandbox.exec.completed'] as const;

export interface RunOutputs {
  /** The current attempt's outputs. */
  run: RecordedRun;
  /** The attempt in force (1 + the attempts lost to their worker, ADR 0035). */
  attempt: number;
  /** The `step.completed` receipts of each attempt lost to its worker, by attempt (1 the first). */
  lostSteps: ReadonlyMap<number, readonly EvidenceReceiptOf<'step.completed'>[]>;
  /** The key (`key:<id>`) that alone, with admin keys, may read the outputs of a run that mounts secrets; null when it mounts none. */
  holder: string | null;
}

export interface ExecOutputs {
  execs: ReadonlyMap<string, EvidenceReceiptOf<'sandbox.exec.completed'>>;
  holder: string | null;
}

function parsed(chainId: string, receipts: readonly Receipt[]): EvidenceReceipt[] {
  return receipts.map((receipt) => {
    const result = parseEvidenceReceipt(receipt);
    if (!result.ok) throw new CairnError('E_INTERNAL', `receipt ${receipt.seq} of ${chainId} does not match its contract: ${result.message}`, { chainId, seq: receipt.seq });
    return result.receipt;
  });
}

export function runOutputsOf(runId: string, receipts: readonly Receipt[]): RunOutputs {
  const chain = parsed(runId, receipts);
  const submitted = chain.find((r): r is EvidenceReceiptOf<'run.submitted'> => r.type === 'run.submitted');
  // No readable submission: held by nobody, so only an admin key may read (fail closed).
  const holder = submitted === undefined ? '' : (submitted.spec.secrets ?? []).length === 0 ? null : submitted.submitted_by;
  const attempts = splitAttempts(chain);
  const lostSteps = new Map(attempts.lost.map((lost) => [lost.attempt, lost.receipts.filter((r): r is EvidenceReceiptOf<'step.completed'> => r.type === 'step.completed')]));
  return { run: recordedRunOf(chain), attempt: attempts.attempt, lostSteps, holder };
}

export function execOutputsOf(sandboxId: string, receipts: readonly Receipt[]): ExecOutputs {
  const chain = parsed(sandboxId, receipts);
  const requested = chain.find((r): r is EvidenceReceiptOf<'sandbox.requested'> => r.type === 'sandbox.requested');
  const holder = requested === undefined ? '' : (requested.spec.secrets ?? []).length === 0 ? null : requested.requested_by;
  const execs = new Map<string, EvidenceReceiptOf<'sandbox.exec.completed'>>();
  for (const receipt of chain) if (receipt.type === 'sandbox.exec.completed' && !execs.has(receipt.exec_id)) execs.set(receipt.exec_id, receipt);
  return { execs, holder };
}

/**
 * The outputs of a chain that mounts secrets are its holder's and admin keys' alone: a step can
 * print a value in a form no scanner recognises (`rev /run/secrets/NAME`), and the values are the
 * holder's grant, not the tenant's.
 */
export function checkReader(holder: string | null, principal: Principal, chainId: string): void {
  if (holder === null || hasScope(principal.scopes, 'admin') || holder === `key:${principal.keyId}`) return;
  throw new CairnError('E_FORBIDDEN', `${chainId} mounts secrets: only the key that ${chainId.startsWith('sbx_') ? 'created' : 'submitted'} it, or an admin key, may read its outputs`, { chainId });
}

/**
 * The sha256 a step's stream must hash to, in `attempt` (absent: the current one); E_NOT_FOUND
 * when the step has not completed in it, or the run has had no such attempt.
 */
export function stepStreamSha(outputs: RunOutputs, runId: string, index: number, stream: OutputStream, attempt?: number): string {
  if (attempt !== undefined && attempt > outputs.attempt) {
    throw new CairnError('E_NOT_FOUND', `run ${runId} has had no attempt ${attempt} (it is on attempt ${outputs.attempt})`, { runId, attempt });
  }
  const lost = attempt === undefined || attempt === outputs.attempt ? null : (outputs.lostSteps.get(attempt) ?? []);
  const step = lost === null ? outputs.run.steps.find((s) => s.step_index === index) : lost.find((s) => s.step_index === index);
  const of = lost === null ? '' : ` in its attempt ${attempt}`;
  if (step === undefined) throw new CairnError('E_NOT_FOUND', `run ${runId} has no completed step ${index}${of}`, { runId, step: index, ...(attempt === undefined ? {} : { attempt }) });
  return stream === 'stdout' ? step.stdout_sha256 : step.stderr_sha256;
}

/** The sha256 a collected file must hash to; E_NOT_FOUND when the run did not collect that path. */
export function fileSha(outputs: RunOutputs, runId: string, path: string): string {
  const sha = outputs.run.files.get(path);
  if (sha === undefined) throw new CairnError('E_NOT_FOUND', `run ${runId} collected no file ${path}`, { runId, path });
  return sha;
}

export function execStreamSha(outputs: ExecOutputs, sandboxId: string, execId: string, stream: OutputStream): string {
  const exec = outputs.execs.get(execId);
  if (exec === undefined) throw new CairnError('E_NOT_FOUND', `sandbox ${sandboxId} has no completed exec ${execId}`, { sandboxId, execId });
  return stream === 'stdout' ? exec.stdout_sha256 : exec.stderr_sha256;
}
