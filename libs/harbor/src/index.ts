export { HARBOR_PATHS, HARBOR_PREBUILT_LINKS, harborBuildContext, harborImageAdditions, harborRunSpec, harborTaskFromFiles, judgeCriterion, prebuiltEnvironmentImage } from './harbor-task.js';
export type { AgentStep, HarborLayout, HarborLimits, HarborTask, TaskFile } from './harbor-task.js';
export { HarborJudgeSchema, HarborTaskTomlSchema, parseTaskToml } from './task-toml.schema.js';
export type { HarborJudge, HarborTaskToml } from './task-toml.schema.js';
