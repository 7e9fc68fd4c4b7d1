export { createEvidenceWorld, expectSealedChain, sleep, startProcess, StderrCapture, stopAll, TENANT, until } from './evidence-world.harness.js';
export type { EvidenceWorld, ServiceProcess } from './evidence-world.harness.js';
export {
  CAPS,
  failingRun,
  IMAGE,
  JUNIT_FAIL,
  JUNIT_PASS,
  LocalChain,
  missingSourceRun,
  passingRun,
  plannedRun,
  TAP_FAIL,
  TAP_PASS,
  timedOutRun,
  unitTestSpec,
  withLostAttempt,
} from './executed-run.fixture.js';
export type { LostAttemptScenario, PlannedEvent, PlannedRun, RunScenario, StepScenario } from './executed-run.fixture.js';
export { racingLog } from './racing-log.js';
export type { RaceOptions } from './racing-log.js';
