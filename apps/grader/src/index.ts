export { GraderConfigSchema } from './grader.config.js';
export type { GraderConfig } from './grader.config.js';
export { GRADER_SERVICE, graderModule } from './grader.module.js';
export { GradingHandler } from './grading.handler.js';
export { decideSeal, finalStateOf, gradeRun, openSandboxes, SEAL_TRIGGERS, shouldGrade } from './run-seal.js';
export type { EventFields, SealDecision } from './run-seal.js';
