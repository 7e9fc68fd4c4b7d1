import type { EvidenceReceipt, SandboxSpec, SubmitterPrincipal } from '@cairn/contracts';

/*
 * The seam between the sandbox-session backend and its callers (the REST gateway). Every
 * method throws a CairnError with a taxonomy code, with details.sandboxId when one exists.
 * Results are read back from the receipts on the sandbox's own chain (`sbx_…`).
 */

export interface SandboxReady {
  sandboxId: string;
  /** The seq of the sandbox.created receipt. */
  seq: number;
  /** The chain's stored receipts, from seq 1 through `sandbox.created`: what the answer is folded from. */
  receipts: readonly EvidenceReceipt[];
  /** An earlier create under the same idempotency key: the chain may have gone on past `seq`. */
  duplicate: boolean;
}

export interface ExecCommand {
  argv: string[];
  env?: Record<string, string>;
  workdir?: string;
  stdin?: Uint8Array;
  timeoutSeconds?: number;
}

export type ExecLimitHit = 'E_TIMEOUT' | 'E_MEM_LIMIT' | 'E_PROC_LIMIT' | 'E_DISK_LIMIT';

export interface ExecOutcome {
  execId: string;
  exitCode: number | null;
  /** At most 1 MiB kept per stream; stdoutBytes/stderrBytes count everything the program wrote. */
  stdout: Uint8Array;
  stderr: Uint8Array;
  stdoutBytes: number;
  stderrBytes: number;
  stdoutSha256: string;
  stderrSha256: string;
  truncated: boolean;
  durationMs: number;
  limitHit: ExecLimitHit | null;
  errorCode: string | null;
  /** The seq of the sandbox.exec.completed receipt. */
  seq: number;
  /** True when this exec ended the sandbox (a limit hit destroys it). */
  sandboxDestroyed: boolean;
}

export interface FileWritten {
  path: string;
  bytes: number;
  sha256: string;
  seq: number;
}

export interface FileRead {
  path: string;
  content: Uint8Array;
  bytes: number;
  sha256: string;
  seq: number;
}

export interface CreateSandboxInput {
  tenant: string;
  /** The actor asking, e.g. `key:<key id>`. */
  requestedBy: string;
  spec: SandboxSpec;
  idempotencyKey?: string;
  /** The verified key's id and scopes, recorded on `sandbox.requested` for policy. */
  principal?: SubmitterPrincipal;
}

/**
 * Who operates on a sandbox: the tenant, and the actor with whether it is an admin key. A plain
 * tenant string is a caller with no key — it may operate only on sandboxes that mount no secret.
 */
export interface SandboxCaller {
  tenant: string;
  /** `key:<key id>`. */
  actor: string;
  admin: boolean;
}

export type OutputStream = 'stdout' | 'stderr';

export interface CreateOptions {
  /**
   * The caller went away (an HTTP client disconnected): the create stops waiting and the sandbox
   * is deleted on the record, whatever state it reached, so nothing is left for nobody.
   */
  signal?: AbortSignal;
}

export interface SandboxSessions {
  /**
   * Appends through intake/policy/scheduler/runtime; resolves once sandbox.created is on the chain.
   * A create that is not answered with a ready sandbox — refused, failed, not ready within
   * `timeoutMs`, or abandoned through `options.signal` — leaves nothing behind: the sandbox is
   * ended on the record before the error is thrown, and never comes alive later.
   */
  create(input: CreateSandboxInput, timeoutMs: number, options?: CreateOptions): Promise<SandboxReady>;
  /**
   * The operations on a sandbox that mounts secrets are its creator's (or an admin key's) alone:
   * another caller is E_FORBIDDEN, since what it runs or reads there could carry the values out.
   */
  exec(sandboxId: string, caller: SandboxCaller | string, command: ExecCommand, onOutput?: (stream: OutputStream, chunk: Uint8Array) => void): Promise<ExecOutcome>;
  writeFile(sandboxId: string, caller: SandboxCaller | string, path: string, content: Uint8Array, mode?: number): Promise<FileWritten>;
  readFile(sandboxId: string, caller: SandboxCaller | string, path: string): Promise<FileRead>;
  /**
   * Idempotent: a destroyed sandbox resolves. A PENDING one (not created yet: deciding, queued or
   * starting) is deleted at once, through intake; a READY one by its worker.
   */
  destroy(sandboxId: string, tenant: string, requestedBy: string): Promise<void>;
  /** Stops the subscriptions this instance holds (not the NATS connection, which the caller owns). */
  close(): Promise<void>;
}
