import type { ArtifactStore } from '@cairn/artifact-store';
import { AnySandboxPathSchema, CairnError, isCairnError, MAX_KEPT_OUTPUT_BYTES, MAX_SANDBOX_FILE_BYTES, OP_MESSAGE_HEADER, OP_STREAM_HEADER, SANDBOX_CHUNK_BYTES } from '@cairn/contracts';
import type { ErrorBody, ErrorCode, EventType, ExecOp, GrantedCaps, OpEnd, ReadOp, Redaction, SandboxOp, WriteOp } from '@cairn/contracts';
import type { AppendResult } from '@cairn/evidence-log';
import { isHeadMoved } from '@cairn/evidence-log';
import { readSandboxChain } from '@cairn/lifecycle';
import type { LeaseStore } from '@cairn/operational';
import { assertSandboxPath } from '@cairn/sandbox';
import type { DestroyResult, ExecResult, SandboxHandle } from '@cairn/sandbox';
import type { EgressDenial } from '@cairn/sandbox-docker';
import type { OutputScanner, ScannedSecret } from '@cairn/secrets';
import type { JsonLogger, ReactionContext } from '@cairn/service-kit';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { createHash } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { pullChunks } from './chunk-pull.js';
import { AnsweredOps } from './answered-ops.js';
import { LeaseKeeper } from './lease-keeper.js';
import { LiveRedactor } from './live-output.js';
import { describeLeaks, leakRedactedFields } from './leak-guard.js';
import type { LeakGuard } from './leak-guard.js';
import { describeRedactions, redactionsOf, secretRedactedFields } from './output-redaction.js';
import { putStreams } from './output-store.js';
import { egressDeniedFields, limitsHit, sandboxDestroyedFields } from './runtime-receipts.builder.js';
import type { EventFields, TeardownReason } from './runtime-receipts.builder.js';
import type { SandboxEngine } from './sandbox-engine.adapter.js';
import { fileCommandError, getFileCommand, putFileCommand } from './sandbox-file.commands.js';

/** An exec that names no timeout gets this long (bounded by the sandbox's wall cap). */
const DEFAULT_EXEC_TIMEOUT_MS = 600_000;
/** The runtime's own file commands in a session (write, read) get this long. */
const FILE_COMMAND_TIMEOUT_MS = 120_000;
const LIMIT_CODES: ReadonlySet<string> = new Set(['E_TIMEOUT', 'E_MEM_LIMIT', 'E_PROC_LIMIT', 'E_DISK_LIMIT']);

export interface SandboxSessionDeps {
  /** Caused by the session's `run.scheduled`; every receipt of the session is appended through it. */
  ctx: ReactionContext;
  handle: SandboxHandle;
  caps: GrantedCaps;
  /** The chain's head once `sandbox.created` is stored. */
  createdSeq: number;
  expiresAt: number;
  /** The time to live `sandbox.requested` settled, for `sandbox.expired`. */
  ttlSeconds: number;
  idleMs: number;
  leaseId: string;
  outputBytesPerExec: number | null;
  /** At most this many `egress.denied` go on the chain (CAIRN_EGRESS_DENIALS_RECORDED), as for a run. */
  egressDenialsRecorded: number;
  engine: SandboxEngine;
  artifacts: ArtifactStore;
  leases: LeaseStore;
  nc: NatsConnection;
  scanner: OutputScanner;
  /**
   * Scans what the session appends, answers and logs beyond its output (names, hosts, messages),
   * with `scanner`; its first finding must call the session's `secretSeen()`.
   */
  guard: LeakGuard;
  secretValues: ScannedSecret[];
  workerId: string;
  renewMs: number;
  ttlMs: number;
  logger: JsonLogger;
  /** Told once the session has ended (its teardown recorded), so the host forgets it. */
  onEnded: (sandboxId: string) => void;
}

/** The end of a session: why, and (for an expiry) what `sandbox.expired` says. */
type Ending = { reason: TeardownReason; expired?: { cause: 'ttl' | 'idle' }; teardown?: DestroyResult | null };

/** What an op's `end` message carries on success, besides the receipt. */
interface OpDone {
  receipt: AppendResult;
  chunks: { stdout: number; stderr: number; data: number };
}

/**
 * One live sandbox session on this worker (docs/sandboxes.md): its operations run one at a time
 * (a promise queue), each appending its receipts on the sandbox's chain — guarded on the head the
 * session last saw, so nothing lands after someone else ended it — and answering on the op's
 * inbox. Its lease is renewed for its whole life; its time to live and idle limit reap it with
 * `sandbox.expired`; a cap an exec hits destroys it; every ending records `sandbox.destroyed`.
 */
export class SandboxSession {
  readonly sandboxId: string;
  private queue: Promise<void> = Promise.resolve();
  private headSeq: number;
  private lastActivity = Date.now();
  private ended = false;
  private ttlTimer: NodeJS.Timeout | null = null;
  private idleTimer: NodeJS.Timeout | null = null;
  private readonly keeper: LeaseKeeper;
  private readonly startedAt = performance.now();
  private finished!: () => void;
  /** Egress refusals seen, and the appends of those recorded (one after another). */
  private denialsSeen = 0;
  private denials: Promise<void> = Promise.resolve();
  /** Set once the ending is being recorded: a refusal after it is only logged. */
  private denialsClosed = false;
  /** Resolves once the session's teardown is recorded. */
  readonly done: Promise<void>;
  /** The session's log: every line redacted by the guard first. */
  private readonly logger: JsonLogger;
  /** `secret.redacted` receipts this session appended (their keys). */
  private redactedCount = 0;
  /** The answers given, by op id: an op delivered again is answered, not performed again. */
  private readonly answered = new AnsweredOps();
  /** Exec ids started here: one is used once (its receipts are keyed by it), whatever op names it. */
  private readonly execIds = new Set<string>();

  constructor(private readonly deps: SandboxSessionDeps) {
    this.sandboxId = deps.ctx.chainId;
    this.logger = deps.logger.filtered(deps.guard.logFilter);
    this.headSeq = deps.createdSeq;
    this.done = new Promise((resolve) => (this.finished = resolve));
    this.keeper = new LeaseKeeper(
      deps.leases,
      {
        runId: this.sandboxId,
        workerId: deps.workerId,
        leaseId: deps.leaseId,
        renewMs: deps.renewMs,
        ttlMs: deps.ttlMs,
        onTick: () => undefined,
        onLost: () => void this.enqueue(async () => void (await this.end({ reason: 'worker_lost' }))),
      },
      this.logger,
    );
  }

  get live(): boolean {
    return !this.ended;
  }

  get tenant(): string {
    return this.deps.ctx.receipt.tenant;
  }

  /**
   * Records `sandbox.created` onto the head the session was started from; false (nothing stored)
   * when the chain moved on meanwhile and the sandbox is no longer waiting to be created.
   */
  async created(fields: EventFields<'sandbox.created'>): Promise<boolean> {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        this.headSeq = (await this.deps.ctx.appendAt(this.headSeq, 'sandbox.created', fields, 'created')).receipt.seq;
        return true;
      } catch (error) {
        if (!isHeadMoved(error)) throw error;
        const { receipts, headSeq } = await this.deps.ctx.snapshot();
        this.headSeq = headSeq;
        if (readSandboxChain(receipts)?.view?.state !== 'PENDING') return false;
      }
    }
    return false;
  }

  /** Starts the lease renewal and the reaper's timers; `setup` (files, secrets) is the first operation. */
  start(setup: () => Promise<void>): void {
    this.keeper.start();
    void this.enqueue(async () => {
      try {
        await setup();
      } catch (error) {
        this.logger.write('error', 'a sandbox session could not be set up', { sandbox_id: this.sandboxId, error: describe(error) });
        await this.fail(isCairnError(error) && LIMIT_CODES.has(error.code) ? error.code : 'E_SANDBOX_START', `setting up the sandbox failed: ${describe(error)}`);
      }
    });
    const ttlLeft = Math.max(0, this.deps.expiresAt - Date.now());
    this.ttlTimer = setTimeout(() => void this.enqueue(async () => void (await this.end({ reason: 'ttl', expired: { cause: 'ttl' } }))), ttlLeft);
    this.armIdle();
  }

  /** Serves one op after the ones before it; resolves when it is answered. */
  serve(op: SandboxOp): Promise<void> {
    return this.enqueue(() => this.answer(op));
  }

  /** Ends the session now (shutdown, or a `destroy` op), after the op in hand. */
  shutdown(reason: TeardownReason): Promise<void> {
    return this.enqueue(async () => void (await this.end({ reason })));
  }

  /**
   * The guard found a secret in something this session was about to record, answer or log: after
   * the operation in hand, it is recorded and the session ends E_SECRET_SEEN (destroyed).
   */
  secretSeen(): void {
    void this.enqueue(() => this.endSecretSeen([]));
  }

  /**
   * A connection the egress proxy refused: `egress.denied` on the chain, guarded on the session's
   * head like every receipt of it and in the order seen, without stopping the session — as a
   * run's (run-execution.ts). At most `egressDenialsRecorded` are appended, so a sandbox cannot
   * flood its chain; past that they are only logged, as is any seen once the ending is recorded.
   */
  recordDenial(denial: EgressDenial): void {
    const logger = this.logger;
    const n = ++this.denialsSeen;
    logger.write('warn', 'egress refused', { sandbox_id: this.sandboxId, host: denial.host, port: denial.port, reason: denial.reason });
    if (this.denialsClosed || n > this.deps.egressDenialsRecorded) {
      if (n === this.deps.egressDenialsRecorded + 1) logger.write('warn', 'egress refusals past the recorded maximum are only logged', { sandbox_id: this.sandboxId });
      return;
    }
    this.denials = this.denials
      .then(() => (this.denialsClosed ? undefined : this.appendOwn('egress.denied', { ...egressDeniedFields(denial, null) }, `egress-${n}`)))
      .then(
        () => undefined,
        (error: unknown) => logger.write('error', 'could not record an egress refusal', { sandbox_id: this.sandboxId, error: describe(error) }),
      );
  }

  private enqueue(task: () => Promise<void>): Promise<void> {
    const next = this.queue.then(task, task);
    this.queue = next.catch((error: unknown) => {
      this.logger.write('error', 'a sandbox session task failed', { sandbox_id: this.sandboxId, error: describe(error) });
    });
    return this.queue;
  }

  private armIdle(): void {
    if (this.idleTimer !== null) clearTimeout(this.idleTimer);
    if (this.ended) return;
    this.idleTimer = setTimeout(
      () =>
        void this.enqueue(async () => {
          // An op may have finished meanwhile: only a full idle period reaps.
          if (Date.now() - this.lastActivity >= this.deps.idleMs) await this.end({ reason: 'idle', expired: { cause: 'idle' } });
          else this.armIdle();
        }),
      Math.max(0, this.lastActivity + this.deps.idleMs - Date.now()),
    );
  }

  private async answer(op: SandboxOp): Promise<void> {
    const reply = new OpReply(this.deps.nc, op.reply_to);
    // Delivered again (its ack lost): answered as the first time, never performed twice.
    const seen = this.answered.begin(op.op_id);
    if (seen.kind === 'repeat') {
      this.logger.write('warn', 'a sandbox op delivered again is answered, not performed again', { sandbox_id: this.sandboxId, op_id: op.op_id, kind: op.op.kind });
      reply.end(seen.answer ?? { ok: false, error: { code: 'E_CONFLICT', message: `op ${op.op_id} on sandbox ${this.sandboxId} is under way already`, details: { opId: op.op_id } } });
      return;
    }
    const end: OpEnd = this.ended ? { ok: false, error: { code: 'E_CONFLICT', message: `sandbox ${this.sandboxId} has ended`, details: { state: 'DESTROYED' } } } : await this.performed(op, reply);
    this.answered.answered(op.op_id, end);
    reply.end(end);
  }

  /** Performs the op; what its `end` message says. */
  private async performed(op: SandboxOp, reply: OpReply): Promise<OpEnd> {
    try {
      const done = await this.perform(op, reply);
      this.lastActivity = Date.now();
      this.armIdle();
      return { ok: true, seq: done.receipt.receipt.seq, stream_seq: done.receipt.streamSeq, chunks: done.chunks, sandbox_destroyed: this.ended };
    } catch (error) {
      // An error's text may name what the workload made (a file, a path): it leaves redacted.
      const body = errorBody(error);
      return { ok: false, error: { ...body, message: this.deps.guard.text('reply', 'message', body.message), ...(body.details === undefined ? {} : { details: this.deps.guard.value('reply', 'details', body.details) }) } };
    }
  }

  private async perform(op: SandboxOp, reply: OpReply): Promise<OpDone> {
    switch (op.op.kind) {
      case 'exec':
        return this.exec(op.op, reply);
      case 'write':
        return this.write(op.op, op.op_id);
      case 'read':
        return this.read(op.op, op.op_id, reply);
      case 'destroy': {
        const destroyed = await this.end({ reason: 'deleted' });
        if (destroyed === null) throw new CairnError('E_CONFLICT', `sandbox ${this.sandboxId} has ended`, { state: 'DESTROYED' });
        return { receipt: destroyed, chunks: { stdout: 0, stderr: 0, data: 0 } };
      }
    }
  }

  private async exec(op: ExecOp, reply: OpReply): Promise<OpDone> {
    const { engine, artifacts, scanner, caps } = this.deps;
    const workdir = op.workdir ?? '/work';
    // The gateway checked it; checked again here, where it reaches the engine (the CVE-2024-21626 shape).
    if (!AnySandboxPathSchema.safeParse(workdir).success) throw new CairnError('E_INPUT', `workdir ${JSON.stringify(workdir)} is not an absolute, normalised path outside /proc, /sys, /dev, /run and /var/run`);
    const env = op.env ?? {};
    const key = `exec-${op.exec_id}`;
    // A second op naming a used id would have its appends deduped to the first exec's receipts.
    if (this.execIds.has(op.exec_id)) throw new CairnError('E_CONFLICT', `exec id ${op.exec_id} was used before on sandbox ${this.sandboxId}: an exec id names one exec`, { execId: op.exec_id });
    this.execIds.add(op.exec_id);
    await this.appendOwn('sandbox.exec.started', { exec_id: op.exec_id, argv: op.argv, workdir, env_names: Object.keys(env).sort() }, key);
    // The exec's own timeout, shorter than the wall cap, kills only the program and its session (the
    // sandbox lives on, as in any interactive shell); the cap, or a timeout not below it, is a cap hit.
    const wallMs = caps.wall_seconds * 1000;
    const ownMs = op.timeout_seconds === undefined ? null : op.timeout_seconds * 1000;
    const interruptAfterMs = ownMs !== null && ownMs < wallMs ? ownMs : undefined;
    const timeoutMs = interruptAfterMs !== undefined ? wallMs : Math.min(ownMs ?? DEFAULT_EXEC_TIMEOUT_MS, wallMs);
    // Live output: each stream redacted as it comes and sent at once; what is sent, put together,
    // is the kept output redacted — what the receipt's sha256 covers (live-output.ts).
    const chunks = { stdout: 0, stderr: 0, data: 0 };
    const live = {
      stdout: new LiveRedactor(scanner, MAX_KEPT_OUTPUT_BYTES, (bytes) => (chunks.stdout += reply.chunks('out', bytes, 'stdout'))),
      stderr: new LiveRedactor(scanner, MAX_KEPT_OUTPUT_BYTES, (bytes) => (chunks.stderr += reply.chunks('out', bytes, 'stderr'))),
    };
    let result: ExecResult;
    try {
      result = await engine.driver.exec(this.deps.handle, {
        argv: op.argv,
        env,
        workdir,
        ...(op.stdin_b64 === undefined ? {} : { stdin: new Uint8Array(Buffer.from(op.stdin_b64, 'base64')) }),
        timeoutMs,
        ...(interruptAfterMs === undefined ? {} : { interruptAfterMs }),
        maxOutputBytes: MAX_KEPT_OUTPUT_BYTES,
        ...(this.deps.outputBytesPerExec === null ? {} : { stopAfterOutputBytes: this.deps.outputBytesPerExec }),
        onOutput: (stream, chunk) => live[stream].push(chunk),
      });
    } catch (error) {
      // The workload ended its own sandbox (or the engine went away): the exec still gets its
      // receipt (every started one has one), naming what was already sent, and the session ends.
      const [stdout, stderr] = [live.stdout.finish(), live.stderr.finish()];
      const stored = await putStreams(artifacts, stdout.bytes, stderr.bytes);
      const fields = interruptedExecFields(op, {
        stdoutSha256: stored.stdoutSha256,
        stderrSha256: stored.stderrSha256,
        stdoutBytes: stdout.bytes.byteLength,
        stderrBytes: stderr.bytes.byteLength,
        redactions: [...redactionsOf(stdout.findings, 'stdout'), ...redactionsOf(stderr.findings, 'stderr')],
      });
      const receipt = await this.appendOwn('sandbox.exec.completed', fields, key);
      await this.fail(isCairnError(error) && error.code === 'E_RUNTIME_ABSENT' ? 'E_RUNTIME_ABSENT' : 'E_SANDBOX_START', `exec ${op.exec_id} could not run: ${describe(error)}`);
      return { receipt, chunks };
    }
    // Redaction before hashing, as for a run's step: what is stored, hashed, sent and appended is
    // the scanned output — here scanned as it streamed, the held-back rest now.
    const [stdout, stderr] = [live.stdout.finish(), live.stderr.finish()];
    const scanned = { redactions: [...redactionsOf(stdout.findings, 'stdout'), ...redactionsOf(stderr.findings, 'stderr')] };
    result = { ...result, stdout: stdout.bytes, stderr: stderr.bytes };
    // A full store keeps neither stream (the receipt names the empty artifact, E_CAPACITY); the session goes on.
    const { stdoutSha256, stderrSha256, full } = await putStreams(artifacts, result.stdout, result.stderr);
    const limit = result.limitHit ?? (result.outputBudgetHit ? 'E_BUDGET' : null);
    const interrupted = result.interrupted === true;
    const errorCode: ErrorCode | undefined = limit ?? (interrupted ? 'E_TIMEOUT' : scanned.redactions.length > 0 ? 'E_SECRET_SEEN' : full ? 'E_CAPACITY' : undefined);
    const fields: EventFields<'sandbox.exec.completed'> = {
      exec_id: op.exec_id,
      argv: op.argv,
      // Killed at its own deadline: it did not exit by itself (no limit in limits_hit: the sandbox lives on).
      exit_code: interrupted ? null : result.exitCode,
      signal: interrupted || result.exitCode === null ? 'SIGKILL' : null,
      stdout_sha256: stdoutSha256,
      stderr_sha256: stderrSha256,
      stdout_bytes: result.stdoutBytes,
      stderr_bytes: result.stderrBytes,
      output_truncated: result.truncated || full,
      duration_ms: Math.max(0, Math.round(result.durationMs)),
      limits_hit: limitsHit(result),
      redactions: scanned.redactions.slice(0, 256),
      ...(errorCode === undefined ? {} : { error_code: errorCode }),
    };
    const receipt = await this.appendOwn('sandbox.exec.completed', fields, key);
    // A secret in the output ends the session as it ends a run (ROLLBACK E_SECRET_SEEN): recorded, destroyed.
    if (scanned.redactions.length > 0) await this.endSecretSeen(scanned.redactions, `the output of exec ${op.exec_id}`, result.teardown);
    // A cap (or the output budget) stopped the exec by destroying the sandbox, as for a run's step.
    else if (limit !== null) await this.end({ reason: 'limit', teardown: result.teardown });
    return { receipt, chunks };
  }

  private async write(op: WriteOp, opId: string): Promise<OpDone> {
    assertSandboxPath(op.path);
    const mode = op.mode ?? 0o644;
    if (mode > 0o777) throw new CairnError('E_INPUT', `mode of ${op.path} must be permission bits 0..0o777`, { path: op.path });
    const content = await pulledFile(this.deps.nc, op);
    const result = await this.fileCommand(putFileCommand(op.path, mode), content, 4096);
    if (result.exitCode !== 0) throw fileCommandError(op.path, result);
    const receipt = await this.appendOwn('sandbox.file.written', { path: op.path, sha256: op.sha256, bytes: op.bytes, ...(op.mode === undefined ? {} : { mode: op.mode }) }, `write-${opId}`);
    return { receipt, chunks: { stdout: 0, stderr: 0, data: 0 } };
  }

  private async read(op: ReadOp, opId: string, reply: OpReply): Promise<OpDone> {
    // Any absolute path: the image's files too (sandbox-file.commands.ts says why that is safe).
    if (!AnySandboxPathSchema.safeParse(op.path).success) throw new CairnError('E_INPUT', `${JSON.stringify(op.path.slice(0, 256))} is not an absolute, normalised path outside /proc, /sys, /dev, /run and /var/run`, { path: op.path.slice(0, 1024) });
    const result = await this.fileCommand(getFileCommand(op.path), undefined, MAX_SANDBOX_FILE_BYTES);
    if (result.exitCode !== 0) throw fileCommandError(op.path, result);
    if (result.stdoutBytes > MAX_SANDBOX_FILE_BYTES) throw new CairnError('E_TOO_LARGE', `${op.path} is larger than ${MAX_SANDBOX_FILE_BYTES} bytes`, { path: op.path });
    // What leaves the sandbox is scanned like a run's collected files; a secret in it is not sent at
    // all: the read is recorded (of the redacted bytes), and the session ends E_SECRET_SEEN.
    const scanned = this.deps.scanner.scan(result.stdout);
    const content = scanned.bytes;
    const sha256 = await this.deps.artifacts.put(content);
    if (scanned.findings.length > 0) {
      await this.appendOwn('sandbox.file.read', { path: op.path, sha256, bytes: content.byteLength }, `read-${opId}`);
      const redactions = redactionsOf(scanned.findings, 'file', op.path);
      await this.endSecretSeen(redactions, `the file read of ${op.path}`);
      throw new CairnError('E_SECRET_SEEN', `E_SECRET_SEEN: ${describeRedactions(redactions, 'read from the sandbox')}; nothing was sent, and the sandbox was destroyed`, { path: op.path });
    }
    const data = reply.chunks('data', content);
    const receipt = await this.appendOwn('sandbox.file.read', { path: op.path, sha256, bytes: content.byteLength }, `read-${opId}`);
    return { receipt, chunks: { stdout: 0, stderr: 0, data } };
  }

  /** A file command of the runtime's own in the sandbox; a cap it hits ends the session (and is the op's error). */
  private async fileCommand(argv: string[], stdin: Uint8Array | undefined, maxOutputBytes: number): Promise<ExecResult> {
    const result = await this.deps.engine.driver.exec(this.deps.handle, {
      argv,
      ...(stdin === undefined ? {} : { stdin }),
      timeoutMs: Math.min(FILE_COMMAND_TIMEOUT_MS, this.deps.caps.wall_seconds * 1000),
      maxOutputBytes: maxOutputBytes + 1,
    });
    if (result.limitHit !== null) {
      await this.end({ reason: 'limit', teardown: result.teardown });
      throw new CairnError(result.limitHit, `the file transfer hit a cap (${result.limitHit}); the sandbox was destroyed`);
    }
    return result;
  }

  /**
   * A secret or key pattern was seen — in the output (`redactions`) or by the guard (a name, a host,
   * a message): one `secret.redacted` per finding and a critical `alert.raised` on the chain, a
   * `fatal` log line (names and counts only), then `run.failed` E_SECRET_SEEN and the sandbox destroyed.
   */
  private async endSecretSeen(redactions: readonly Redaction[], where = 'what the sandbox produced', teardown?: DestroyResult | null): Promise<void> {
    if (this.ended) return;
    const leaks = this.deps.guard.takeUnrecorded();
    if (redactions.length === 0 && leaks.length === 0) return;
    try {
      for (const redaction of redactions.slice(0, 64)) await this.appendOwn('secret.redacted', secretRedactedFields(redaction), `redacted-${this.redactedCount++}`);
      for (const leak of leaks.slice(0, 64)) await this.appendOwn('secret.redacted', leakRedactedFields(leak), `redacted-${this.redactedCount++}`);
      const said = [redactions.length > 0 ? describeRedactions(redactions, where) : null, leaks.length > 0 ? describeLeaks(leaks) : null].filter((x) => x !== null).join('; ');
      const message = `E_SECRET_SEEN: ${said}; redacted before it was recorded, and the sandbox is destroyed`;
      await this.appendOwn('alert.raised', { severity: 'critical', error_code: 'E_SECRET_SEEN', message: message.slice(0, 2048) }, `alert-${this.redactedCount}`);
      this.logger.write('fatal', 'secret seen in a sandbox session: redacted, session ended', { sandbox_id: this.sandboxId, error_code: 'E_SECRET_SEEN', findings: redactions.length + leaks.length });
      await this.appendOwn('run.failed', { error_code: 'E_SECRET_SEEN', message: message.slice(0, 2000) }, 'failed');
    } catch (error) {
      this.logger.write('error', 'could not record a secret seen in a sandbox session', { sandbox_id: this.sandboxId, error: describe(error) });
    }
    await this.end({ reason: 'failed', ...(teardown === undefined ? {} : { teardown }) });
  }

  /** Fails the session on the record (`run.failed`), then tears it down. */
  private async fail(code: ErrorCode, message: string): Promise<void> {
    if (this.ended) return;
    try {
      await this.appendOwn('run.failed', { error_code: code, message: message.slice(0, 2000) }, 'failed');
    } catch (error) {
      this.logger.write('error', 'could not record a sandbox session failure', { sandbox_id: this.sandboxId, error: describe(error) });
    }
    await this.end({ reason: 'failed' });
  }

  /**
   * Ends the session once: `sandbox.expired` first when it expired, the sandbox destroyed
   * (verified, I-8), `sandbox.destroyed` with why, the lease given back. Returns the
   * `sandbox.destroyed` append, or null when the session had ended already.
   */
  private async end(ending: Ending): Promise<AppendResult | null> {
    if (this.ended) return null;
    this.ended = true;
    if (this.ttlTimer !== null) clearTimeout(this.ttlTimer);
    if (this.idleTimer !== null) clearTimeout(this.idleTimer);
    const { engine, handle, leases } = this.deps;
    const logger = this.logger;
    let destroyed: AppendResult | null = null;
    try {
      await this.keeper.stop();
      // Every refusal seen so far is on the chain before the ending, as for a run.
      await this.denials;
      this.denialsClosed = true;
      if (ending.expired !== undefined) {
        await this.appendOwn(
          'sandbox.expired',
          {
            ttl_seconds: this.deps.ttlSeconds,
            expires_at: new Date(this.deps.expiresAt).toISOString(),
            cause: ending.expired.cause,
            idle_seconds: Math.max(1, Math.round(this.deps.idleMs / 1000)),
            last_activity_at: new Date(this.lastActivity).toISOString(),
          },
          'expired',
        ).catch((error: unknown) => logger.write('error', 'could not record a sandbox expiry', { sandbox_id: this.sandboxId, error: describe(error) }));
      }
      const gone = ending.teardown ?? (await engine.driver.destroy(handle).catch(() => ({ verifiedGone: false })));
      const fields = sandboxDestroyedFields(handle.name, gone.verifiedGone, ending.reason, performance.now() - this.startedAt);
      destroyed = await this.appendOwn('sandbox.destroyed', fields, 'destroyed').catch((error: unknown) => {
        logger.write('error', 'could not record a sandbox teardown', { sandbox_id: this.sandboxId, error: describe(error) });
        return null;
      });
      await leases.delete(this.sandboxId, this.deps.leaseId).catch(() => false);
      logger.write('info', 'sandbox session ended', { sandbox_id: this.sandboxId, reason: ending.reason, verified_gone: gone.verifiedGone });
    } finally {
      for (const secret of this.deps.secretValues) secret.value.fill(0);
      this.deps.onEnded(this.sandboxId);
      this.finished();
    }
    return destroyed;
  }

  /**
   * Appends onto the head this session last saw. Someone else moving the head (the scheduler
   * failing a lost worker) is read: while the sandbox is still READY the append is tried on the new
   * head, otherwise the session stops taking operations (E_CONFLICT) — teardown receipts excepted.
   */
  private async appendOwn(type: EventType, unscanned: Record<string, unknown>, key: string): Promise<AppendResult> {
    // What the caller or the workload chose (a path, an error's text) is redacted before it is hashed.
    const fields = this.deps.guard.receipt(type, unscanned);
    const teardown = type === 'sandbox.destroyed' || type === 'sandbox.expired' || type === 'run.failed';
    for (let attempt = 0; ; attempt++) {
      try {
        const appended = await this.deps.ctx.appendAt(this.headSeq, type, fields, key);
        this.headSeq = Math.max(this.headSeq, appended.receipt.seq);
        return appended;
      } catch (error) {
        if (!isHeadMoved(error) || attempt >= 4) throw error;
        const { receipts, headSeq } = await this.deps.ctx.snapshot();
        const view = readSandboxChain(receipts)?.view ?? null;
        this.headSeq = headSeq;
        if (view === null || view.sealed || (view.state !== 'READY' && !(teardown && view.state === 'FAILED' && type === 'sandbox.destroyed'))) {
          if (!this.ended) void this.enqueue(() => this.end({ reason: 'worker_lost' }).then(() => undefined));
          throw new CairnError('E_CONFLICT', `sandbox ${this.sandboxId} is ${view?.state ?? 'unknown'}: it takes no operation`, { state: view?.state ?? null });
        }
      }
    }
  }
}

/** Answers on an op's inbox: chunks in order, then one `end`. */
class OpReply {
  private ended = false;

  constructor(
    private readonly nc: NatsConnection,
    private readonly subject: string,
  ) {}

  /** Sends `bytes` in chunks of `kind` (`out` with its stream, or `data`); returns how many. */
  chunks(kind: 'out' | 'data', bytes: Uint8Array, stream?: 'stdout' | 'stderr'): number {
    let sent = 0;
    for (let from = 0; from < bytes.byteLength; from += SANDBOX_CHUNK_BYTES) {
      const hdrs = natsHeaders();
      hdrs.set(OP_MESSAGE_HEADER, kind);
      if (stream !== undefined) hdrs.set(OP_STREAM_HEADER, stream);
      this.nc.publish(this.subject, bytes.subarray(from, Math.min(bytes.byteLength, from + SANDBOX_CHUNK_BYTES)), { headers: hdrs });
      sent += 1;
    }
    return sent;
  }

  end(end: OpEnd): void {
    if (this.ended) return;
    this.ended = true;
    const hdrs = natsHeaders();
    hdrs.set(OP_MESSAGE_HEADER, 'end');
    this.nc.publish(this.subject, new TextEncoder().encode(JSON.stringify(end)), { headers: hdrs });
  }
}

/** The caller's file, chunk by chunk (chunk-pull.ts), checked against the size and sha256 the op names. */
async function pulledFile(nc: NatsConnection, op: WriteOp): Promise<Uint8Array> {
  const content = await pullChunks(nc, op, op.path, { path: op.path });
  if (content.byteLength !== op.bytes || createHash('sha256').update(content).digest('hex') !== op.sha256) {
    throw new CairnError('E_INPUT', `the bytes of ${op.path} do not match the size and sha256 the request named`, { path: op.path });
  }
  return content;
}

/** What an exec cut off by its sandbox's end had sent before, for its receipt. */
interface SentOutput {
  stdoutSha256: string;
  stderrSha256: string;
  stdoutBytes: number;
  stderrBytes: number;
  redactions: Redaction[];
}

function interruptedExecFields(op: ExecOp, sent: SentOutput): EventFields<'sandbox.exec.completed'> {
  return {
    exec_id: op.exec_id,
    argv: op.argv,
    exit_code: null,
    signal: 'SIGKILL',
    stdout_sha256: sent.stdoutSha256,
    stderr_sha256: sent.stderrSha256,
    stdout_bytes: sent.stdoutBytes,
    stderr_bytes: sent.stderrBytes,
    output_truncated: true,
    duration_ms: 0,
    limits_hit: [],
    redactions: sent.redactions.slice(0, 256),
    ...(sent.redactions.length > 0 ? { error_code: 'E_SECRET_SEEN' as const } : {}),
  };
}

function errorBody(error: unknown): ErrorBody {
  if (isCairnError(error)) return error.toBody();
  return { code: 'E_INTERNAL', message: describe(error) };
}

function describe(error: unknown): string {
  if (error instanceof CairnError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
