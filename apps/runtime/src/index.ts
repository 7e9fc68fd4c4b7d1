export { CANCEL_EVENT_TYPES, CancelWatch } from './cancel-watch.adapter.js';
export { LeaseKeeper } from './lease-keeper.js';
export type { LeaseKeeperOptions } from './lease-keeper.js';
export { answerCancel, settleLostRun } from './lost-run.js';
export type { LostRunOutcome } from './lost-run.js';
export { assessScheduled, decideEnding, inputFile, lastPlacementOn, parseChain, stopCauseOf } from './run-assessment.js';
export type { Assessment, Ending, ParsedChain, RunNetwork, RunPlan, StopCause } from './run-assessment.js';
export { RunExecution } from './run-execution.js';
export type { RunExecutionDeps } from './run-execution.js';
export {
  DRIVER_NAME,
  egressDeniedFields,
  grantedCaps,
  interruptedStepFields,
  limitsHit,
  runCancelledFields,
  runExecutedFields,
  runFailedFields,
  sandboxCaps,
  sandboxCreatedFields,
  sandboxDestroyedFields,
  STEP_STAGE,
  stepCompletedFields,
  stepStartedFields,
} from './runtime-receipts.builder.js';
export type { CompletedStep, EventFields, StoredOutput, TeardownReason } from './runtime-receipts.builder.js';
export { hostFacts, loadRuntimeConfig, runtimeConfigSchema } from './runtime.config.js';
export type { HostFacts, RuntimeConfig } from './runtime.config.js';
export { RuntimeHandler } from './runtime.handler.js';
export { RUNTIME_SERVICE, runtimeModule } from './runtime.module.js';
export { ARTIFACT_STORE, LEASE_STORE, SANDBOX_ENGINE, WORKER_REGISTRY } from './runtime.tokens.js';
export { RuntimeWorker } from './runtime-worker.service.js';
export type { ReconcileReport } from './runtime-worker.service.js';
export { SandboxEngine } from './sandbox-engine.adapter.js';
export { confirmedHardening, hardeningOf, hardeningProblems, tmpfsSizeBytes } from './sandbox-hardening.js';
export type { InspectedSandbox, SandboxPromise } from './sandbox-hardening.js';
export { DEFAULT_WORKDIR, planSteps, sandboxLifetimeSeconds, stepTimeoutMs, toolName } from './step-plan.js';
export type { PlannedStep, StepPlan } from './step-plan.js';
export { runtimeDurableName, workerIdFromHostname } from './worker-id.js';
