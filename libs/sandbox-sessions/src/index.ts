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
export {
  ChunkRequestSchema,
  DestroyOpSchema,
  ExecOpSchema,
  MAX_EXEC_STDIN_BYTES,
  MAX_KEPT_OUTPUT_BYTES,
  MAX_SANDBOX_FILE_BYTES,
  OP_MESSAGE_HEADER,
  OP_STREAM_HEADER,
  OpEndSchema,
  opSubject,
  ReadOpSchema,
  SANDBOX_CHUNK_BYTES,
  SandboxOpSchema,
  WriteOpSchema,
} from './sandbox-ops.schema.js';
export type { DestroyOp, ExecOp, OpEnd, OpMessageKind, ReadOp, SandboxOp, WriteOp } from './sandbox-ops.schema.js';
