import type { EvidenceReceipt } from '@cairn/contracts';
import { sandboxAwaitsSeal, sandboxFinalState } from '@cairn/lifecycle';
import type { SandboxChain } from '@cairn/lifecycle';
import { openSandboxes } from './run-seal.js';
import type { SealDecision } from './run-seal.js';

/** The receipts after which a sandbox session may be over: destroyed, denied, failed, or deleted before it was created. */
export const SANDBOX_SEAL_TRIGGERS: readonly string[] = ['sandbox.destroyed', 'policy.decided', 'run.failed', 'run.cancelled', 'alert.raised'];

/**
 * Whether to seal a sandbox's chain, and with what: once it has ended (DESTROYED → `SEALED`,
 * REJECTED and FAILED with their code) and its sandbox is torn down on the record — or
 * `teardownGraceMs` after the trigger, so a failure's teardown is not shut out by the seal.
 * After the seal, the chain takes nothing more: every mutating call on it is refused.
 */
export function decideSandboxSeal(chain: SandboxChain, trigger: EvidenceReceipt, nowMs: number, teardownGraceMs: number): SealDecision {
  const view = chain.view;
  if (view === null) return { kind: 'none', reason: 'an empty chain' };
  if (!sandboxAwaitsSeal(view)) return { kind: 'none', reason: view.sealed ? 'sealed already' : `the sandbox is ${view.state}` };
  const finalState = sandboxFinalState(view);
  const open = openSandboxes(chain.receipts);
  const waited = nowMs - Date.parse(trigger.ts);
  if (open.length > 0 && waited < teardownGraceMs) {
    return { kind: 'wait', reason: `${open.join(', ')} not torn down on the record yet (${waited} ms of ${teardownGraceMs})` };
  }
  if (finalState === 'SEALED') return { kind: 'seal', fields: { final_state: 'SEALED', evidence_digest: view.headHash } };
  return { kind: 'seal', fields: { final_state: finalState, evidence_digest: view.headHash, error_code: view.errorCode ?? 'E_UNKNOWN_STATE' } };
}
