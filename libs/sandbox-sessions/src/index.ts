export type {
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
export { openSandboxSessions } from './sandbox-sessions.nats.js';
export type { SandboxSessionsConfig, SandboxSessionsDeps } from './sandbox-sessions.nats.js';
