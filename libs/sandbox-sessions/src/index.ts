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
