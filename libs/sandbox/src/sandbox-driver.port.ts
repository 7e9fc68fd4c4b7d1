import type { LimitCode, LimitObservation } from './decide-limit.js';
import type { SandboxCaps, SandboxSpecInput } from './sandbox-spec.schema.js';

/*
 * The sandbox port (I-2: untrusted commands reach an isolation engine only through it). The
 * runtime service drives it; the Docker adapter implements it, and other isolation (gVisor,
 * Kata, Firecracker) plugs in behind the same interface.
 *
 * Errors are `CairnError`s with a code from the failure taxonomy:
 * - `E_RUNTIME_ABSENT`: no engine answers (any method).
 * - `E_IMAGE_PULL`: `create` was given an image the engine does not have (drivers never pull).
 * - `E_SANDBOX_START`: the engine refused or failed to create or start the sandbox.
 * - `E_INPUT`: a bad spec, argv, path or bound; nothing was started.
 * - `E_NOT_FOUND`: the sandbox behind a handle is gone (destroyed, reaped, stopped).
 * - `E_CONFLICT`: a second operation on a sandbox while one runs (one step at a time).
 * - `E_BUDGET`: `getFiles` would return more than `maxBytes`.
 * - `E_TIMEOUT` … `E_DISK_LIMIT`: `putFiles` / `getFiles` hit a cap (the sandbox is destroyed).
 * A step that hits a cap is not an error: `exec` returns `limitHit` and has destroyed the sandbox;
 * so is one that passes its output budget (`outputBudgetHit`).
 */

/** What a driver hands back from `create`: plain data, safe to log and to persist. */
export interface SandboxHandle {
  /** The engine's id of the sandbox. */
  readonly id: string;
  /** `cairn-<chain id>-<n>`. */
  readonly name: string;
  readonly chainId: string;
  readonly workerId: string;
  /** The image actually started (`sha256:…`), for the receipt; the spec may have named a tag. */
  readonly imageId: string;
  readonly caps: SandboxCaps;
}

export interface SandboxFileIn {
  /** Absolute, under `/work`, `/out` or `/tmp`. */
  path: string;
  content: Uint8Array;
  /** Permission bits; 0o644 when absent. */
  mode?: number;
}

export interface SandboxFileOut {
  path: string;
  content: Uint8Array;
  size: number;
  mode: number;
}

export interface ExecRequest {
  /** I-3: the program and its arguments, passed to the kernel as they are; never a shell string. */
  argv: readonly string[];
  /** Never a secret here: a process's environment is readable in `/proc` (mount secrets as files). */
  env?: Readonly<Record<string, string>>;
  /** Absolute; the image's working directory when absent. */
  workdir?: string;
  /** Fed to the program's stdin, then closed; stdin is closed from the start when absent. */
  stdin?: Uint8Array;
  /** Wall time of this step; at most the sandbox's `caps.wallSeconds`. */
  timeoutMs: number;
  /**
   * The caller's own deadline, shorter than `timeoutMs` (a session's exec): when it passes first,
   * the program and everything in its session are killed and the sandbox lives on — not a cap, so
   * `limitHit` stays null and the result says `interrupted`. Absent: only `timeoutMs`, a cap.
   */
  interruptAfterMs?: number;
  /** Kept from each of stdout and stderr; the rest is counted and dropped. */
  maxOutputBytes: number;
  /**
   * An output budget (a policy's bytes per step): once stdout and stderr together, kept or not,
   * pass it, the step is stopped at once by destroying the sandbox — as a cap stops it — and the
   * result says `outputBudgetHit`. Absent: no budget; output is only bounded by `maxOutputBytes`.
   */
  stopAfterOutputBytes?: number;
  /**
   * Told each piece of output as the program writes it (kept or not), while the step runs; what
   * `exec` resolves with is unchanged. For live output: the listener must be quick and not throw
   * (a throw is ignored).
   */
  onOutput?: (stream: 'stdout' | 'stderr', chunk: Uint8Array) => void;
}

export interface DestroyResult {
  /** The engine no longer knows the sandbox (looked up after removal: I-8). */
  verifiedGone: boolean;
}

export interface ExecResult {
  /** null when the program did not exit by itself (killed with its sandbox after a limit). */
  exitCode: number | null;
  /** The first `maxOutputBytes` of each stream. */
  stdout: Uint8Array;
  stderr: Uint8Array;
  /** Everything the program wrote, kept or not. */
  stdoutBytes: number;
  stderrBytes: number;
  truncated: boolean;
  durationMs: number;
  /** The first cap the step hit (decided by `decideLimit`), or null. */
  limitHit: LimitCode | null;
  /** Every cap seen, first sighting each, with what showed it: for the step's receipt. */
  limits: LimitObservation[];
  /**
   * The output passed the request's `stopAfterOutputBytes` before anything else stopped the step:
   * it was stopped there, the sandbox destroyed (`E_BUDGET`; not a cap, so `limitHit` stays null).
   */
  outputBudgetHit: boolean;
  /** Set when a limit or the output budget ended the step: the sandbox was destroyed before `exec` returned. */
  teardown: DestroyResult | null;
  /** `interruptAfterMs` passed before the program ended: it was killed with its session, the sandbox kept. */
  interrupted?: boolean;
}

export interface SandboxDriver {
  /** Resolves when the engine answers; `E_RUNTIME_ABSENT` when none does. */
  ping(): Promise<void>;
  /** Starts a hardened sandbox whose PID 1 idles; steps run in it with `exec`. */
  create(spec: SandboxSpecInput): Promise<SandboxHandle>;
  /** Writes files into the sandbox's tmpfs mounts (one tar stream over exec). */
  putFiles(handle: SandboxHandle, files: readonly SandboxFileIn[]): Promise<void>;
  /** Runs one step; output bounded, caps watched, the sandbox destroyed if one was hit. */
  exec(handle: SandboxHandle, request: ExecRequest): Promise<ExecResult>;
  /**
   * Reads regular files (a directory yields every regular file below it; links and devices are
   * skipped; a path that does not exist yields nothing). More than `maxBytes` in all is `E_BUDGET`.
   */
  getFiles(handle: SandboxHandle, paths: readonly string[], maxBytes: number): Promise<SandboxFileOut[]>;
  /** Kills and removes the sandbox, then checks the engine no longer knows it. Idempotent. */
  destroy(handle: SandboxHandle): Promise<DestroyResult>;
  /**
   * Destroys this worker's Cairn sandboxes whose chain `keep` rejects (and those without a valid
   * chain label); never another worker's, another tool's or an unlabelled container. Returns the
   * names of the sandboxes verified gone.
   */
  reconcile(workerId: string, keep: (chainId: string) => boolean): Promise<string[]>;
  /**
   * Destroys what is left of one chain's sandboxes on this worker (a create that failed or crashed
   * before its receipt), touching nothing of any other chain: the cheap reap before a create,
   * where `reconcile` would list every sandbox, network and firewall rule of the worker. Returns
   * the names of the sandboxes verified gone.
   */
  reapChain(workerId: string, chainId: string): Promise<string[]>;
}
