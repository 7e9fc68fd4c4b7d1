export type {
  CreateOptions,
  CreateSandboxInput,
  ExecCommand,
  ExecLimitHit,
  ExecOutcome,
  FileRead,
  FileWritten,
  OutputStream,
  SandboxCaller,
  SandboxReady,
  SandboxSessions,
} from './sandbox-sessions.port.js';
export { CAPACITY_RETRY_AFTER_SECONDS, openSandboxSessions } from './sandbox-sessions.nats.js';
export type { SandboxSessionsConfig, SandboxSessionsDeps } from './sandbox-sessions.nats.js';
export { chooseBuildWorker, packBuildContext, unpackBuildContext } from './image-build-context.js';
export type { ContextFileBytes, PackedBuildContext } from './image-build-context.js';
export { ImageBuilder } from './image-builds.nats.js';
export type { ImageBuildRequest, ImageBuilderConfig, ImageBuilderDeps } from './image-builds.nats.js';
