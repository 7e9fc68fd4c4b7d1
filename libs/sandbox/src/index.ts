export { decideLimit, firstLimit, LIMIT_CODES, LIMIT_PRECEDENCE, LimitWatch, observeLimits } from './decide-limit.js';
export type { LimitCode, LimitObservation, LimitSample, TmpfsUsage } from './decide-limit.js';
export { planReconcile } from './reconcile-plan.js';
export type { ListedContainer, PoolHolding, ReapTarget } from './reconcile-plan.js';
export type {
  DestroyResult,
  ExecRequest,
  ExecResult,
  SandboxDriver,
  SandboxFileIn,
  SandboxFileOut,
  SandboxHandle,
} from './sandbox-driver.port.js';
export {
  CONTAINER_NAME_PREFIX,
  containerName,
  LABEL_KEYS,
  MANAGED_LABEL_VALUE,
  parseContainerName,
  POOL_NAME_PREFIX,
  poolContainerName,
  poolLabels,
  sandboxLabels,
  workerLabelFilters,
} from './sandbox-labels.js';
export { assertSandboxPath, parentDirectories, tarEntryName } from './sandbox-path.js';
export {
  MIN_CAPS,
  parseSandboxSpec,
  PoolNameSchema,
  SandboxCapsSchema,
  SandboxLabelsSchema,
  SandboxSpecSchema,
  WorkerIdSchema,
} from './sandbox-spec.schema.js';
export type { SandboxCaps, SandboxLabels, SandboxSpec, SandboxSpecInput } from './sandbox-spec.schema.js';
export { FILE_ROOTS, INODES_PER_MIB, memoryLimitMiB, tmpfsLayout, WRITABLE_MOUNTS } from './tmpfs-layout.js';
export type { TmpfsMount, WritableMount } from './tmpfs-layout.js';
export { dockerfileBases } from './dockerfile-bases.js';
