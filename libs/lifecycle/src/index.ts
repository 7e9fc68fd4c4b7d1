export { decideAdmin, emptyAdminChain, foldAdminChain } from './admin-chain.js';
export type { AdminChainView, AdminCommand, AdminDecision, AdminKeyView } from './admin-chain.js';
export { evolveRun, foldRun, initialRunView } from './evolve-run.js';
export type { RunReceipt, RunView } from './evolve-run.js';
export { approvalPath, expiredApprovals, pendingApprovals } from './run-approval.js';
export type { ApprovalDecision, ApprovalPath } from './run-approval.js';
export { CANCEL_ANSWER_KEY, cancelPath, openSandboxes, pendingCancelRequest } from './run-cancel.js';
export type { CancelPath } from './run-cancel.js';
export { readRunChain, readValidRunChain } from './run-chain.reader.js';
export type { RunChain, ValidRunChain } from './run-chain.reader.js';
export {
  canTransition,
  failureState,
  isTerminal,
  PRE_RUN_STATES,
  ROLLBACK_ERROR_CODES,
  RUN_TRANSITIONS,
  TERMINAL_RUN_STATES,
} from './run-transitions.js';
export { evolveSandbox, foldSandbox, readSandboxChain, sandboxAwaitsSeal, sandboxFinalState } from './evolve-sandbox.js';
export type { SandboxChain, SandboxReceipt, SandboxView } from './evolve-sandbox.js';
export { attemptOf, lostWorkerRecord, retriesOf, splitAttempts } from './run-attempt.js';
export type { LostAttempt, LostPlacement, LostWorkerRecord, RunAttempts } from './run-attempt.js';
export { regradePath } from './run-regrade.js';
export type { RegradePath } from './run-regrade.js';
