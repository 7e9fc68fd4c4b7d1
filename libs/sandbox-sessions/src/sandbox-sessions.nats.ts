import { randomBytes } from 'node:crypto';
import { CairnError, isCairnError, MAX_EXEC_STDIN_BYTES, MAX_KEPT_OUTPUT_BYTES, MAX_SANDBOX_FILE_BYTES, OP_MESSAGE_HEADER, OP_STREAM_HEADER, OpEndSchema, opSubject, parseEvidenceReceipt, SANDBOX_CHUNK_BYTES, SandboxIdSchema } from '@cairn/contracts';
import type { ErrorCode, EvidenceReceipt, EvidenceReceiptOf, OpEnd, SandboxOp } from '@cairn/contracts';
import { sha256Hex } from '@cairn/evidence';
import { inboxOf } from '@cairn/evidence-log';
import type { EvidenceLog } from '@cairn/evidence-log';
import { foldSandbox } from '@cairn/lifecycle';
import type { SandboxView } from '@cairn/lifecycle';
import type { CommandBus } from '@cairn/operational';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { nuid } from '@nats-io/transport-node';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import type {
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
import { safeJson, serveChunks } from './wire.js';

export interface SandboxSessionsConfig {
  /** The command bus' subject prefix (`cairn`): ops go to `<prefix>.cmd.sbxop.<worker id>`. */
  commandSubjectPrefix?: string;
  /** How long the intake command may take to answer; default 10 s. */
  commandTimeoutMs?: number;
  /** Added to an exec's own timeout (and the wait for its turn) before the caller gives up; default 5 min. */
  opGraceMs?: number;
  /**
   * How long a sandbox whose create the caller stopped waiting for is still watched, to be deleted
   * once ready; default 10 min (past it, its idle limit reaps it).
   */
  abandonedWatchMs?: number;
}

export interface SandboxSessionsDeps {
  nc: NatsConnection;
  log: EvidenceLog;
  bus: CommandBus;
  config?: SandboxSessionsConfig;
}

/** What a caller remembers of a sandbox once it has read its chain: it never changes for a live session. */
interface KnownSandbox {
  tenant: string;
  workerId: string;
  /** The actor that alone (with admin keys) may operate it, when it mounts secrets; null when it mounts none. */
  holder: string | null;
}

/** A sandbox's worker, with the check (pending or done) that it still takes operations. */
interface LiveTarget extends KnownSandbox {
  confirmed: Promise<void>;
}

const LIMIT_CODES: readonly string[] = ['E_TIMEOUT', 'E_MEM_LIMIT', 'E_PROC_LIMIT', 'E_DISK_LIMIT'];
/** Receipts after which a sandbox takes no operation. */
const ENDING_TYPES: ReadonlySet<string> = new Set(['sandbox.destroyed', 'run.sealed', 'run.failed', 'run.cancelled', 'sandbox.expired']);
/** What an `E_CAPACITY` answer suggests waiting before the next try (`Retry-After`). */
export const CAPACITY_RETRY_AFTER_SECONDS = 5;
const DEFAULT_EXEC_TIMEOUT_SECONDS = 600;

/**
 * The NATS implementation of `SandboxSessions` (docs/adr/0006-sandbox-sessions.md): create goes
 * through intake on the command bus and waits on the chain (an ordered consumer: stored receipts
 * only) for `sandbox.created`; operations go to the worker holding the sandbox on its JetStream
 * work-queue subject, and their answers — output chunks, then an `end` naming the op's receipt —
 * come back on a core-NATS inbox. Every answer is checked against the receipt as stored.
 */
export async function openSandboxSessions(deps: SandboxSessionsDeps): Promise<SandboxSessions> {
  const jsm = await jetstreamManager(deps.nc);
  return new NatsSandboxSessions(deps, jsm, jsm.jetstream());
}

class NatsSandboxSessions implements SandboxSessions {
  private readonly known = new Map<string, KnownSandbox>();
  private readonly prefix: string;
  private readonly commandTimeoutMs: number;
  private readonly opGraceMs: number;
  private readonly encoder = new TextEncoder();
  private readonly pending = new Set<Subscription>();
  private readonly abandonedWatchMs: number;
  /** Ends the chain follows `close` must not wait out. */
  private readonly closers = new Set<() => void>();
  private closed = false;

  constructor(
    private readonly deps: SandboxSessionsDeps,
    private readonly jsm: JetStreamManager,
    private readonly js: JetStreamClient,
  ) {
    this.prefix = deps.config?.commandSubjectPrefix ?? deps.bus.subjectPrefix;
    this.commandTimeoutMs = deps.config?.commandTimeoutMs ?? 10_000;
    this.opGraceMs = deps.config?.opGraceMs ?? 300_000;
    this.abandonedWatchMs = deps.config?.abandonedWatchMs ?? 600_000;
  }

  async create(input: CreateSandboxInput, timeoutMs: number, options: CreateOptions = {}): Promise<SandboxReady> {
    const deadline = Date.now() + timeoutMs;
    const keySha = input.idempotencyKey === undefined ? undefined : sha256Hex(input.idempotencyKey);
    const msgId = keySha === undefined ? `sbx-${nuid.next()}` : sha256Hex(`sandbox:${input.tenant}:${input.idempotencyKey}`);
    const reply = await this.deps.bus.send(
      'sandbox_create',
      {
        tenant: input.tenant,
        requested_by: input.requestedBy,
        spec: input.spec,
        ...(keySha === undefined ? {} : { idempotency_key_sha256: keySha }),
        ...(input.principal === undefined ? {} : { principal: input.principal }),
      },
      // Not cut short by the caller's own wait: without intake's answer the sandbox would exist
      // with nobody knowing its id (and so nobody to delete it when the caller has given up).
      { msgId, timeoutMs: this.commandTimeoutMs },
    );
    if (!reply.ok) throw new CairnError(reply.error.code, reply.error.message, reply.error.details);
    const sandboxId = reply.run_id;
    const ready = await this.waitForReady(sandboxId, input, Math.max(0, deadline - Date.now()), options.signal);
    if (reply.duplicate) {
      // The key named a sandbox made before: its chain read from seq 1 says it was ready, and it may
      // have ended since. A destroyed sandbox is never answered as ready (intake makes a new one
      // only for a sandbox that ended unused).
      const { view } = await this.viewOf(sandboxId, input.tenant);
      if (view.state !== 'READY' || view.destroyReason !== null) {
        throw new CairnError('E_CONFLICT', `the Idempotency-Key names sandbox ${sandboxId}, which is ${view.state === 'READY' ? 'ending' : view.state}: create under a new key`, { sandboxId, state: view.state });
      }
    }
    return { sandboxId, duplicate: reply.duplicate, ...ready };
  }

  /**
   * Follows the chain from seq 1 (stored receipts only) until the sandbox is ready or ended. What
   * the chain said of its placement is remembered, so the first operation need not read it again.
   * A sandbox not ready in time, or whose caller went away (`signal`), is deleted on the record
   * before the error is thrown (docs/adr/0015): an answer that is an error leaves nothing behind.
   */
  private async waitForReady(sandboxId: string, input: CreateSandboxInput, timeoutMs: number, signal?: AbortSignal): Promise<Pick<SandboxReady, 'seq' | 'receipts'>> {
    // An object, so the compiler does not narrow what the callback sets.
    const placement: { workerId: string | null; decided: boolean } = { workerId: null, decided: false };
    const receipts: EvidenceReceipt[] = [];
    const outcome = await this.followChain(
      sandboxId,
      timeoutMs,
      (receipt) => {
        receipts.push(receipt);
        if (receipt.type === 'run.scheduled') placement.workerId = receipt.worker_id;
        if (receipt.type === 'policy.decided') placement.decided = true;
        return readinessOf(receipt);
      },
      undefined,
      signal,
    );
    if (outcome === null) {
      const abandoned = signal?.aborted === true;
      await this.endUnanswered(sandboxId, input);
      if (abandoned) throw new CairnError('E_UNAVAILABLE', `the create of ${sandboxId} was abandoned by its caller: the sandbox is deleted`, { sandboxId });
      // Placed and not started: the runtime did not create it; never placed: a service did not answer.
      if (placement.workerId !== null) {
        throw new CairnError('E_SANDBOX_START', `sandbox ${sandboxId} was placed on worker ${placement.workerId} but not ready within ${timeoutMs} ms: it is deleted`, { sandboxId });
      }
      const stage = placement.decided ? 'placed by the scheduler' : 'decided by policy';
      throw new CairnError('E_UNAVAILABLE', `sandbox ${sandboxId} was not ${stage} within ${timeoutMs} ms: it is deleted`, { sandboxId });
    }
    if (!outcome.ok) throw new CairnError(outcome.code, outcome.message, { ...outcome.details, sandboxId });
    const requested = receipts.find((r): r is EvidenceReceiptOf<'sandbox.requested'> => r.type === 'sandbox.requested');
    if (placement.workerId !== null && requested !== undefined) this.known.set(sandboxId, { tenant: input.tenant, workerId: placement.workerId, holder: holderOf(requested) });
    return { seq: outcome.seq, receipts };
  }

  /**
   * A sandbox nobody will be told of: deleted on the record now — through intake while it is
   * PENDING (so it is never placed, or never started), by its worker once READY. Should that fail
   * (a service down), its chain is watched and it is deleted the moment it is ready.
   */
  private async endUnanswered(sandboxId: string, input: CreateSandboxInput): Promise<void> {
    try {
      await this.destroy(sandboxId, input.tenant, input.requestedBy);
    } catch {
      this.destroyOnceReady(sandboxId, input);
    }
  }

  /**
   * The last resort of `endUnanswered`: keep following the chain (for at most `abandonedWatchMs`)
   * and delete it on the record the moment it is ready, so nothing nobody will use holds a worker
   * slot until its idle limit. An ending before that needs nothing.
   */
  private destroyOnceReady(sandboxId: string, input: CreateSandboxInput): void {
    if (this.closed) return;
    void (async () => {
      const ready = await this.followChain(sandboxId, this.abandonedWatchMs, readinessOf, () => this.closed);
      if (ready?.ok !== true || this.closed) return;
      await this.destroy(sandboxId, input.tenant, input.requestedBy);
    })().catch(() => undefined);
  }

  /**
   * An ordered consumer on the chain's subjects from its first receipt: `decide` sees each stored
   * receipt in order until it returns an answer. null when `timeoutMs` passes first.
   */
  private async followChain<T>(
    chainId: string,
    timeoutMs: number,
    decide: (receipt: EvidenceReceipt) => T | null,
    stopped?: () => boolean,
    signal?: AbortSignal,
  ): Promise<T | null> {
    const aborted = (): boolean => signal?.aborted === true;
    if (aborted()) return null;
    const subject = this.deps.log.chainSubjects(chainId);
    const consumer = await this.js.consumers.get(this.deps.log.streamName, { filter_subjects: subject });
    const messages = await consumer.consume({ max_messages: 64 });
    const timer = setTimeout(() => void messages.close(), timeoutMs);
    const closing = () => void messages.close();
    if (stopped !== undefined) this.closers.add(closing);
    signal?.addEventListener('abort', closing, { once: true });
    try {
      for await (const msg of messages) {
        if (stopped?.() === true || aborted()) return null;
        const parsed = parseEvidenceReceipt(msg.json());
        if (!parsed.ok) throw new CairnError('E_UNKNOWN_STATE', `an invalid receipt on ${chainId}: ${parsed.message}`, { sandboxId: chainId });
        const answer = decide(parsed.receipt);
        if (answer !== null) return answer;
      }
      return null;
    } finally {
      clearTimeout(timer);
      this.closers.delete(closing);
      signal?.removeEventListener('abort', closing);
      await messages.close();
    }
  }

  async exec(sandboxId: string, caller: SandboxCaller | string, command: ExecCommand, onOutput?: (stream: OutputStream, chunk: Uint8Array) => void): Promise<ExecOutcome> {
    if (command.argv.length === 0) throw new CairnError('E_INPUT', 'argv: at least one element', { sandboxId });
    if (command.stdin !== undefined && command.stdin.byteLength > MAX_EXEC_STDIN_BYTES) {
      throw new CairnError('E_TOO_LARGE', `stdin: at most ${MAX_EXEC_STDIN_BYTES} bytes`, { sandboxId });
    }
    const { tenant } = callerOf(caller);
    const target = await this.liveSandbox(sandboxId, caller);
    const execId = newExecId();
    const kept = { stdout: new ByteSink(MAX_KEPT_OUTPUT_BYTES), stderr: new ByteSink(MAX_KEPT_OUTPUT_BYTES) };
    const timeoutSeconds = command.timeoutSeconds ?? DEFAULT_EXEC_TIMEOUT_SECONDS;
    const { end, receipt } = await this.runOp(
      target,
      sandboxId,
      tenant,
      {
        kind: 'exec',
        exec_id: execId,
        argv: command.argv,
        ...(command.env === undefined ? {} : { env: command.env }),
        ...(command.workdir === undefined ? {} : { workdir: command.workdir }),
        ...(command.stdin === undefined ? {} : { stdin_b64: Buffer.from(command.stdin).toString('base64') }),
        ...(command.timeoutSeconds === undefined ? {} : { timeout_seconds: command.timeoutSeconds }),
      },
      timeoutSeconds * 1000 + this.opGraceMs,
      (msg) => {
        const stream = msg.headers?.get(OP_STREAM_HEADER);
        if (stream !== 'stdout' && stream !== 'stderr') return;
        kept[stream].push(msg.data);
        onOutput?.(stream, msg.data);
      },
    );
    const completed = expectReceipt(receipt, 'sandbox.exec.completed', sandboxId);
    if (completed.exec_id !== execId) throw new CairnError('E_INTERNAL', `the answer to exec ${execId} names ${completed.exec_id}`, { sandboxId });
    checkChunks(end.chunks.stdout, kept.stdout.chunks, 'stdout', sandboxId);
    checkChunks(end.chunks.stderr, kept.stderr.chunks, 'stderr', sandboxId);
    const stdout = kept.stdout.bytes();
    const stderr = kept.stderr.bytes();
    if (sha256Hex(stdout) !== completed.stdout_sha256 || sha256Hex(stderr) !== completed.stderr_sha256) {
      throw new CairnError('E_UNAVAILABLE', `the output of exec ${execId} does not match its receipt (seq ${completed.seq})`, { sandboxId, seq: completed.seq });
    }
    const errorCode = completed.error_code ?? null;
    return {
      execId,
      exitCode: completed.exit_code,
      stdout,
      stderr,
      stdoutBytes: completed.stdout_bytes,
      stderrBytes: completed.stderr_bytes,
      stdoutSha256: completed.stdout_sha256,
      stderrSha256: completed.stderr_sha256,
      truncated: completed.output_truncated,
      durationMs: completed.duration_ms,
      limitHit: errorCode !== null && LIMIT_CODES.includes(errorCode) ? (errorCode as ExecLimitHit) : null,
      errorCode,
      seq: completed.seq,
      sandboxDestroyed: end.sandbox_destroyed,
    };
  }

  async writeFile(sandboxId: string, caller: SandboxCaller | string, path: string, content: Uint8Array, mode?: number): Promise<FileWritten> {
    if (content.byteLength > MAX_SANDBOX_FILE_BYTES) throw new CairnError('E_TOO_LARGE', `a file is at most ${MAX_SANDBOX_FILE_BYTES} bytes`, { sandboxId });
    const { tenant } = callerOf(caller);
    const target = await this.liveSandbox(sandboxId, caller);
    const sha256 = sha256Hex(content);
    const chunks = Math.ceil(content.byteLength / SANDBOX_CHUNK_BYTES);
    const dataSubject = inboxOf(this.deps.nc);
    // The runtime pulls the chunks, one request each, so nothing is sent that nobody reads.
    const serving = serveChunks(this.deps.nc, dataSubject, content, SANDBOX_CHUNK_BYTES);
    this.pending.add(serving);
    try {
      const op = { kind: 'write' as const, path, bytes: content.byteLength, sha256, data_subject: dataSubject, chunks, ...(mode === undefined ? {} : { mode }) };
      const { receipt } = await this.runOp(target, sandboxId, tenant, op, this.opGraceMs);
      const written = expectReceipt(receipt, 'sandbox.file.written', sandboxId);
      if (written.sha256 !== sha256 || written.bytes !== content.byteLength) {
        throw new CairnError('E_UNAVAILABLE', `the file written to ${path} does not match what was sent (seq ${written.seq})`, { sandboxId, seq: written.seq });
      }
      return { path: written.path, bytes: written.bytes, sha256: written.sha256, seq: written.seq };
    } finally {
      serving.unsubscribe();
      this.pending.delete(serving);
    }
  }

  async readFile(sandboxId: string, caller: SandboxCaller | string, path: string): Promise<FileRead> {
    const { tenant } = callerOf(caller);
    const target = await this.liveSandbox(sandboxId, caller);
    const parts: Uint8Array[] = [];
    let size = 0;
    const { end, receipt } = await this.runOp(target, sandboxId, tenant, { kind: 'read', path }, this.opGraceMs, (msg) => {
      if (msg.headers?.get(OP_MESSAGE_HEADER) !== 'data') return;
      size += msg.data.byteLength;
      if (size <= MAX_SANDBOX_FILE_BYTES) parts.push(msg.data);
    });
    const read = expectReceipt(receipt, 'sandbox.file.read', sandboxId);
    checkChunks(end.chunks.data, parts.length, 'data', sandboxId);
    const content = Buffer.concat(parts);
    if (content.byteLength !== read.bytes || sha256Hex(content) !== read.sha256) {
      throw new CairnError('E_UNAVAILABLE', `the file read from ${path} does not match its receipt (seq ${read.seq})`, { sandboxId, seq: read.seq });
    }
    return { path: read.path, content: new Uint8Array(content.buffer, content.byteOffset, content.byteLength), bytes: read.bytes, sha256: read.sha256, seq: read.seq };
  }

  async destroy(sandboxId: string, tenant: string, requestedBy: string): Promise<void> {
    let { view } = await this.viewOf(sandboxId, tenant);
    if (view.state === 'PENDING') {
      // Not created yet: intake ends it at once (`run.cancelled`); the scheduler never places it and
      // a runtime starting it finds its `sandbox.created` refused, and destroys what it started.
      const reply = await this.deps.bus.send('cancel', { tenant, run_id: sandboxId, requested_by: requestedBy }, { msgId: `sbx-delete-${sandboxId}`, timeoutMs: this.commandTimeoutMs });
      if (reply.ok) return;
      if (reply.error.code !== 'E_CONFLICT' || reply.error.details?.['state'] !== 'READY') throw new CairnError(reply.error.code, reply.error.message, { ...reply.error.details, sandboxId });
      // Created meanwhile: its worker deletes it.
      ({ view } = await this.viewOf(sandboxId, tenant));
    }
    if (view.state !== 'READY' || view.workerId === null) return; // ended already: nothing to do
    try {
      const { receipt } = await this.runOp({ tenant: view.tenant, workerId: view.workerId, holder: null }, sandboxId, tenant, { kind: 'destroy', requested_by: requestedBy }, this.opGraceMs);
      expectReceipt(receipt, 'sandbox.destroyed', sandboxId);
    } catch (error) {
      // Ended by something else meanwhile (a reap, a limit): deleting it again is not an error.
      if (isCairnError(error) && error.code === 'E_CONFLICT') return;
      throw error;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const sub of this.pending) sub.unsubscribe();
    this.pending.clear();
    // Watches of abandoned creates stop here; a delete already sent goes on without this instance.
    for (const close of this.closers) close();
    await Promise.resolve();
  }

  /**
   * The sandbox's worker, and a check that it still takes operations (else 404 or 409). One this
   * instance knows (it created or operated on it) is answered at once; its check — one direct read
   * of the chain's head — runs beside the op's send, and `runOp` waits for it before it waits for an
   * answer (an op sent to a sandbox that has ended is refused by its worker too). Any other is read
   * from its whole chain first.
   */
  private async liveSandbox(sandboxId: string, caller: SandboxCaller | string): Promise<LiveTarget> {
    const who = callerOf(caller);
    const known = this.known.get(sandboxId);
    if (known !== undefined && known.tenant === who.tenant) {
      checkHolder(known, who, sandboxId);
      const confirmed = this.headType(sandboxId).then(async (headType) => {
        if (headType === null || ENDING_TYPES.has(headType)) await this.viewedLive(sandboxId, who.tenant);
      });
      // Settled by `runOp`; never left to reject unheard should the send fail first.
      confirmed.catch(() => undefined);
      return { ...known, confirmed };
    }
    const live = await this.viewedLive(sandboxId, who.tenant);
    checkHolder(live, who, sandboxId);
    return { ...live, confirmed: Promise.resolve() };
  }

  /** The sandbox's worker from its whole chain, once it is this tenant's and ready (else 404 or 409). */
  private async viewedLive(sandboxId: string, tenant: string): Promise<KnownSandbox> {
    const { view, holder } = await this.viewOf(sandboxId, tenant);
    if (view.state !== 'READY' || view.workerId === null || view.destroyReason !== null) {
      throw new CairnError('E_CONFLICT', `sandbox ${sandboxId} is ${view.state === 'READY' ? 'ending' : view.state}: it takes no operation`, {
        sandboxId,
        state: view.state,
      });
    }
    const live = { tenant: view.tenant, workerId: view.workerId, holder };
    this.known.set(sandboxId, live);
    return live;
  }

  private async headType(sandboxId: string): Promise<string | null> {
    const stored = await this.jsm.direct.getMessage(this.deps.log.streamName, { last_by_subj: this.deps.log.chainSubjects(sandboxId) });
    if (stored === null) return null;
    const type = (safeJson(stored.data) as { type?: unknown } | null)?.type;
    return typeof type === 'string' ? type : null;
  }

  /** The sandbox's view from its whole chain, and its holder; another tenant's sandbox is not found, like an unknown one. */
  private async viewOf(sandboxId: string, tenant: string): Promise<{ view: SandboxView; holder: string | null }> {
    if (!SandboxIdSchema.safeParse(sandboxId).success) throw new CairnError('E_NOT_FOUND', `no sandbox ${sandboxId}`, { sandboxId });
    const receipts: unknown[] = [];
    for await (const stored of this.deps.log.readChain(sandboxId)) receipts.push(stored.receipt);
    const parsed = receipts.map((r) => {
      const p = parseEvidenceReceipt(r);
      return p.ok ? p.receipt : (r as EvidenceReceipt);
    });
    const view = foldSandbox(parsed);
    if (view === null || view.tenant !== tenant) throw new CairnError('E_NOT_FOUND', `no sandbox ${sandboxId}`, { sandboxId });
    const requested = parsed.find((r): r is EvidenceReceiptOf<'sandbox.requested'> => r.type === 'sandbox.requested');
    // No readable request: held by nobody, so only an admin key may operate it (fail closed).
    return { view, holder: requested === undefined ? '' : holderOf(requested) };
  }

  /**
   * Publishes one op to the worker's work queue and waits for its `end` on a fresh inbox (every
   * other message on it goes to `onMessage`, in order). Resolves with the op's receipt, read back
   * from the stream by the sequence the `end` names.
   */
  private async runOp(
    target: KnownSandbox & { confirmed?: Promise<void> },
    sandboxId: string,
    tenant: string,
    op: SandboxOp['op'],
    waitMs: number,
    onMessage?: (msg: Msg) => void,
  ): Promise<{ end: Extract<OpEnd, { ok: true }>; receipt: EvidenceReceipt }> {
    const opId = nuid.next();
    const replyTo = inboxOf(this.deps.nc);
    let sub: Subscription | undefined;
    let timer: NodeJS.Timeout | undefined;
    const ended = new Promise<OpEnd>((resolve, reject) => {
      sub = this.deps.nc.subscribe(replyTo, {
        callback: (error, msg) => {
          if (error !== null) {
            reject(new CairnError('E_UNAVAILABLE', `the answer to ${op.kind} on ${sandboxId} was lost: ${error.message}`, { sandboxId }));
            return;
          }
          if (msg.headers?.get(OP_MESSAGE_HEADER) !== 'end') {
            onMessage?.(msg);
            return;
          }
          const parsed = OpEndSchema.safeParse(safeJson(msg.data));
          if (parsed.success) resolve(parsed.data);
          else reject(new CairnError('E_INTERNAL', `the answer to ${op.kind} on ${sandboxId} does not match its contract`, { sandboxId }));
        },
      });
      timer = setTimeout(() => reject(new CairnError('E_UNAVAILABLE', `no answer to ${op.kind} on ${sandboxId} within ${waitMs} ms`, { sandboxId })), waitMs);
    });
    const payload: SandboxOp = { op_id: opId, sandbox_id: sandboxId, tenant, reply_to: replyTo, op };
    try {
      const sent = this.js.publish(opSubject(this.prefix, target.workerId), this.encoder.encode(JSON.stringify(payload)), { msgID: opId, timeout: 5000 }).catch((error: unknown) => {
        throw new CairnError('E_UNAVAILABLE', `cannot send ${op.kind} to ${sandboxId}'s worker: ${error instanceof Error ? error.message : String(error)}`, { sandboxId });
      });
      // Both settled before either's failure is thrown, so neither is left to reject unheard.
      const [send, confirm] = await Promise.allSettled([sent, target.confirmed ?? Promise.resolve()]);
      if (confirm.status === 'rejected') throw confirm.reason;
      if (send.status === 'rejected') throw send.reason;
      const end = await ended;
      if (!end.ok) throw new CairnError(end.error.code, end.error.message, { ...end.error.details, sandboxId });
      if (end.sandbox_destroyed) this.known.delete(sandboxId);
      return { end, receipt: await this.storedReceipt(sandboxId, end.stream_seq, end.seq) };
    } finally {
      clearTimeout(timer);
      sub?.unsubscribe();
    }
  }

  /** The receipt at `streamSeq`, checked to be the chain's `seq`: an answer is only as good as what is stored. */
  private async storedReceipt(sandboxId: string, streamSeq: number, seq: number): Promise<EvidenceReceipt> {
    const stored = await this.jsm.direct.getMessage(this.deps.log.streamName, { seq: streamSeq });
    const parsed = stored === null ? null : parseEvidenceReceipt(safeJson(stored.data));
    if (stored === null || parsed === null || !parsed.ok || parsed.receipt.run_id !== sandboxId || stored.subject !== this.deps.log.subjectFor(sandboxId, parsed.receipt.type) || parsed.receipt.seq !== seq) {
      throw new CairnError('E_UNAVAILABLE', `the receipt ${sandboxId}:${seq} named by the runtime is not stored`, { sandboxId, seq });
    }
    return parsed.receipt;
  }
}

/** A caller given as a tenant alone acts with no key. */
function callerOf(caller: SandboxCaller | string): SandboxCaller {
  return typeof caller === 'string' ? { tenant: caller, actor: '', admin: false } : caller;
}

/** Who alone may operate a sandbox that mounts secrets: the key that asked for it; null when it mounts none. */
function holderOf(requested: EvidenceReceiptOf<'sandbox.requested'>): string | null {
  return (requested.spec.secrets ?? []).length === 0 ? null : requested.requested_by;
}

/**
 * A sandbox that mounts secrets takes operations from its creator and admin keys only: anything
 * else could exec `rev /run/secrets/NAME` (which no scanner recognises) or plant a program the
 * creator runs. The values are the creator's grant, not the tenant's.
 */
function checkHolder(target: KnownSandbox, caller: SandboxCaller, sandboxId: string): void {
  if (target.holder === null || caller.admin || (caller.actor !== '' && caller.actor === target.holder)) return;
  throw new CairnError('E_FORBIDDEN', `sandbox ${sandboxId} mounts secrets: only the key that created it, or an admin key, may operate on it`, { sandboxId });
}

type Readiness = { ok: true; seq: number } | { ok: false; code: ErrorCode; message: string; details?: Record<string, unknown> };

/** What one receipt of a new sandbox's chain says about its start; null while it is still starting. */
function readinessOf(receipt: EvidenceReceipt): Readiness | null {
  switch (receipt.type) {
    case 'sandbox.created':
      return { ok: true, seq: receipt.seq };
    case 'policy.decided':
      if (receipt.decision === 'allow') return null;
      return { ok: false, code: receipt.error_code ?? 'E_POLICY_DENIED', message: `policy refused the sandbox: ${receipt.reasons.join('; ') || receipt.decision}` };
    case 'run.failed':
      if (receipt.error_code === 'E_CAPACITY') {
        return { ok: false, code: 'E_CAPACITY', message: receipt.message, details: { ...(receipt.resource === undefined ? {} : { resource: receipt.resource }), retryAfterSeconds: CAPACITY_RETRY_AFTER_SECONDS } };
      }
      return { ok: false, code: receipt.error_code, message: receipt.message };
    case 'run.cancelled':
      return { ok: false, code: 'E_CONFLICT', message: 'the sandbox was deleted before it was ready' };
    case 'sandbox.destroyed':
    case 'run.sealed':
      return { ok: false, code: 'E_SANDBOX_START', message: `the sandbox ended before it was ready (${receipt.type})` };
    default:
      return null;
  }
}

function expectReceipt<T extends 'sandbox.exec.completed' | 'sandbox.file.written' | 'sandbox.file.read' | 'sandbox.destroyed'>(
  receipt: EvidenceReceipt,
  type: T,
  sandboxId: string,
): EvidenceReceiptOf<T> {
  if (receipt.type !== type || receipt.run_id !== sandboxId) {
    throw new CairnError('E_INTERNAL', `expected ${type} on ${sandboxId}, the runtime named ${receipt.type} of ${receipt.run_id}`, { sandboxId });
  }
  return receipt as EvidenceReceiptOf<T>;
}

/**
 * A fresh exec id: 128 random bits, lowercase as a token must be. Never a case-folded nuid: one
 * gateway's nuids share a prefix and a fixed increment, and for some increments two ids a few dozen
 * apart differ only in case — one exec's receipt then answered for another's (its append deduped).
 */
export function newExecId(random: Uint8Array = randomBytes(16)): string {
  return `x${Buffer.from(random).toString('hex')}`;
}

function checkChunks(sent: number, received: number, what: string, sandboxId: string): void {
  if (sent !== received) throw new CairnError('E_UNAVAILABLE', `${received} of ${sent} ${what} chunks arrived`, { sandboxId });
}


/** Keeps the first `limit` bytes of a stream, as chunks arrive. */
class ByteSink {
  private readonly parts: Uint8Array[] = [];
  private size = 0;
  chunks = 0;

  constructor(private readonly limit: number) {}

  push(chunk: Uint8Array): void {
    this.chunks += 1;
    const room = this.limit - this.size;
    if (room <= 0) return;
    const part = chunk.byteLength <= room ? chunk : chunk.subarray(0, room);
    this.parts.push(part);
    this.size += part.byteLength;
  }

  bytes(): Uint8Array {
    const joined = Buffer.concat(this.parts);
    return new Uint8Array(joined.buffer, joined.byteOffset, joined.byteLength);
  }
}
