import type { ArtifactStore } from '@cairn/artifact-store';
import { CairnError, isCairnError } from '@cairn/contracts';
import type { ErrorCode, EventType, EvidenceReceipt, EvidenceReceiptOf, SandboxHardening } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import { isHeadMoved } from '@cairn/evidence-log';
import { foldRun } from '@cairn/lifecycle';
import type { LeaseStore } from '@cairn/operational';
import { LIMIT_CODES } from '@cairn/sandbox';
import type { DestroyResult, ExecResult, LimitCode, SandboxDriver, SandboxHandle } from '@cairn/sandbox';
import type { JsonLogger, ReactionContext } from '@cairn/service-kit';
import type { NatsConnection } from '@nats-io/transport-node';
import { CancelWatch } from './cancel-watch.adapter.js';
import { LeaseKeeper } from './lease-keeper.js';
import { answerCancel } from './lost-run.js';
import { decideEnding, parseChain, stopCauseOf } from './run-assessment.js';
import type { RunPlan, StopCause } from './run-assessment.js';
import {
  interruptedStepFields,
  runExecutedFields,
  runFailedFields,
  sandboxCaps,
  sandboxCreatedFields,
  sandboxDestroyedFields,
  stepCompletedFields,
  stepStartedFields,
} from './runtime-receipts.builder.js';
import type { CompletedStep, TeardownReason } from './runtime-receipts.builder.js';
import type { RuntimeConfig } from './runtime.config.js';
import { confirmedHardening } from './sandbox-hardening.js';
import type { SandboxEngine } from './sandbox-engine.adapter.js';
import { sandboxLifetimeSeconds } from './step-plan.js';
import type { PlannedStep } from './step-plan.js';

export interface RunExecutionDeps {
  ctx: ReactionContext;
  scheduled: EvidenceReceiptOf<'run.scheduled'>;
  /** The chain's last seq when it was assessed: this run's first receipt is appended onto it. */
  assessedSeq: number;
  plan: RunPlan;
  engine: SandboxEngine;
  artifacts: ArtifactStore;
  leases: LeaseStore;
  log: EvidenceLog;
  nc: NatsConnection;
  config: RuntimeConfig;
  logger: JsonLogger;
}

type Outcome =
  | { kind: 'executed'; artifactHashes: Record<string, string> }
  | { kind: 'failed'; code: ErrorCode; message: string; stepIndex?: number }
  | { kind: 'stopped'; cause: StopCause };

/**
 * `progress`: a receipt that moves the run on (its sandbox, a step starting) — dropped when the run
 * is to stop. `record`: what happened (a step's result, its teardown) — kept unless the run is sealed.
 */
type OwnReceipt = 'progress' | 'record';

const LIMITS: ReadonlySet<string> = new Set(LIMIT_CODES);
const isLimit = (code: string): code is LimitCode => LIMITS.has(code);
/** Reads of a chain that keeps moving under one of this run's receipts before giving up (E_CONFLICT). */
const MAX_READS = 8;
const EMPTY = new Uint8Array(0);

/**
 * One run on this worker, from its lease check to its last receipt (docs/adr/0003): sandbox,
 * files in, each step with its receipt, files out, teardown in `finally` (I-8), then `run.executed`,
 * `run.failed` or — when a cancel was asked — `run.cancelled`. Every append is keyed, so a
 * redelivered reaction stores nothing twice, and guarded on the chain head this run last saw: a
 * receipt someone else wrote meanwhile (a cancel request, the scheduler failing a lost worker) is
 * read before anything more is appended, and a run asked to stop starts nothing more. A crash after
 * `sandbox.created` is never resumed (the next delivery fails the run `E_WORKER_LOST`).
 */
export class RunExecution {
  private readonly driver: SandboxDriver;
  private readonly workerId: string;
  private readonly keeper: LeaseKeeper;
  private readonly watch: CancelWatch;
  private stopCause: StopCause | null = null;
  private handle: SandboxHandle | null = null;
  private teardown: Promise<DestroyResult> | null = null;
  private readonly completed: CompletedStep[] = [];
  /** The chain seq this run last saw as the head (its own last receipt, or the head it read). */
  private lastSeq: number;

  constructor(private readonly deps: RunExecutionDeps) {
    const { ctx, scheduled, config, leases, logger, nc, log } = deps;
    this.driver = deps.engine.driver;
    this.workerId = config.CAIRN_WORKER_ID;
    this.lastSeq = deps.assessedSeq;
    this.keeper = new LeaseKeeper(
      leases,
      {
        runId: ctx.chainId,
        workerId: this.workerId,
        leaseId: scheduled.lease_id,
        renewMs: config.CAIRN_LEASE_RENEW_MS,
        ttlMs: config.CAIRN_LEASE_TTL_MS,
        onTick: () => ctx.working(),
        onLost: (reason) => this.stop({ kind: 'lease_lost', reason }),
      },
      logger,
    );
    this.watch = new CancelWatch(nc, log.subjectFor(ctx.chainId), () => this.stop({ kind: 'cancelled' }));
  }

  private get runId(): string {
    return this.deps.ctx.chainId;
  }

  /** Runs the run; resolves once its receipts are stored (or it was not this worker's to run). */
  async run(): Promise<void> {
    // Watching from the start, then one look at the head: a cancel that landed since the chain was
    // assessed is seen before anything starts, and one landing later while it runs.
    this.watch.start();
    try {
      await this.runWatched();
    } finally {
      await this.stopWatching();
    }
  }

  private async runWatched(): Promise<void> {
    const { plan, logger } = this.deps;
    const early = this.stopCause ?? (await this.endedElsewhere());
    if (early !== null && early.kind !== 'cancelled') {
      logger.write('info', 'not running: the run ended meanwhile', { run_id: this.runId, cause: early.kind });
      return;
    }
    // Only the lease holder acts; a lost or foreign lease means someone else decides this run.
    const notOurs = await this.keeper.renewNow();
    if (notOurs !== null) {
      logger.write('warn', 'not running: the lease is not ours', { run_id: this.runId, reason: notOurs });
      return;
    }
    if (this.stopCause !== null) {
      // Cancelled before anything started: answered (or found answered) with nothing to tear down.
      await this.end({ kind: 'stopped', cause: this.stopCause }, 0);
      return;
    }

    const prepared = await this.prepare();
    if (prepared.kind === 'failed') {
      await this.end(prepared, 0);
      return;
    }

    this.keeper.start();
    const startedAt = performance.now();
    try {
      this.handle = await this.driver.create({
        image: prepared.imageId,
        caps: sandboxCaps(plan.caps),
        labels: { workerId: this.workerId, chainId: this.runId },
        lifetimeSeconds: sandboxLifetimeSeconds(plan.steps),
      });
    } catch (error) {
      await this.end({ kind: 'failed', code: createFailureCode(error), message: `the sandbox could not start: ${describe(error)}` }, performance.now() - startedAt);
      return;
    }
    const handle = this.handle;
    let outcome: Outcome;
    let recorded = false;
    try {
      const hardening = await this.hardening(handle);
      if (this.stopCause !== null) {
        // Stopped while the sandbox was being created: it never served the run and is not recorded.
        outcome = { kind: 'stopped', cause: this.stopCause };
      } else if (hardening.kind === 'failed') {
        outcome = hardening;
      } else {
        recorded = await this.appendOwn('progress', 'sandbox.created', sandboxCreatedFields(handle, plan.image, hardening.hardening));
        outcome = recorded
          ? await this.execute(handle).catch((error: unknown) => this.internalFailure(error))
          : { kind: 'stopped', cause: this.stopCause ?? { kind: 'cancelled' } };
      }
    } finally {
      // I-8: whatever happened above — also an append that failed and will be retried (and then,
      // finding `sandbox.created`, fail the run E_WORKER_LOST) — the sandbox goes, verified.
      await this.destroy();
      await this.keeper.stop();
    }
    const gone = await this.destroy();
    logger.write('info', 'run finished on this worker', { run_id: this.runId, outcome: outcome.kind, verified_gone: gone.verifiedGone });
    if (recorded) await this.recordTeardown(handle, gone, outcome, performance.now() - startedAt);
    await this.end(outcome, performance.now() - startedAt);
  }

  /** Engine, image and leftovers, checked before anything starts; failures here need no teardown. */
  private async prepare(): Promise<{ kind: 'ready'; imageId: string } | Extract<Outcome, { kind: 'failed' }>> {
    const { plan, engine } = this.deps;
    try {
      await this.driver.ping();
    } catch (error) {
      return { kind: 'failed', code: 'E_RUNTIME_ABSENT', message: `no container engine on worker ${this.workerId}: ${describe(error)}` };
    }
    let imageId: string;
    try {
      imageId = await engine.imageId(plan.image);
    } catch (error) {
      return { kind: 'failed', code: isCairnError(error) && error.code === 'E_RUNTIME_ABSENT' ? 'E_RUNTIME_ABSENT' : 'E_IMAGE_PULL', message: describe(error) };
    }
    if (plan.imageDigest !== null && imageId !== plan.imageDigest) {
      return { kind: 'failed', code: 'E_IMAGE_PULL', message: `image ${plan.image} on worker ${this.workerId} is ${imageId}, not the granted ${plan.imageDigest}` };
    }
    // A sandbox of this run left by a crash before `sandbox.created` was recorded: no step ran in it.
    await this.driver.reconcile(this.workerId, (chainId) => chainId !== this.runId).catch((error: unknown) => {
      this.deps.logger.write('warn', 'could not reap leftovers before create', { run_id: this.runId, error: describe(error) });
    });
    return { kind: 'ready', imageId };
  }

  /** The isolation the engine reports, confirmed before any step runs (a sandbox short of it runs nothing). */
  private async hardening(handle: SandboxHandle): Promise<{ kind: 'ok'; hardening: SandboxHardening } | Extract<Outcome, { kind: 'failed' }>> {
    try {
      return { kind: 'ok', hardening: confirmedHardening(await this.deps.engine.inspectSandbox(handle), handle.caps) };
    } catch (error) {
      const code: ErrorCode = isCairnError(error) && error.code === 'E_RUNTIME_ABSENT' ? 'E_RUNTIME_ABSENT' : 'E_SANDBOX_START';
      return { kind: 'failed', code, message: `the sandbox's hardening could not be confirmed: ${describe(error)}` };
    }
  }

  private async execute(handle: SandboxHandle): Promise<Outcome> {
    const { plan } = this.deps;
    try {
      await this.driver.putFiles(handle, plan.files);
    } catch (error) {
      if (this.stopCause !== null) return { kind: 'stopped', cause: this.stopCause };
      return transferFailure(error, 'writing the input files');
    }
    for (const step of plan.steps) {
      const stop = this.stopCause ?? (await this.endedElsewhere());
      if (stop !== null) return { kind: 'stopped', cause: stop };
      const outcome = await this.runStep(handle, step);
      if (outcome !== null) return outcome;
    }
    if (this.stopCause !== null) return { kind: 'stopped', cause: this.stopCause };
    try {
      return { kind: 'executed', artifactHashes: await this.collectOutputs(handle) };
    } catch (error) {
      if (this.stopCause !== null) return { kind: 'stopped', cause: this.stopCause };
      return transferFailure(error, 'collecting the outputs');
    }
  }

  /** One step and its two receipts; returns how the run ends if it ends here, else null. */
  private async runStep(handle: SandboxHandle, step: PlannedStep): Promise<Outcome | null> {
    const { ctx, artifacts, config } = this.deps;
    const key = `step-${step.index}`;
    if (!(await this.appendOwn('progress', 'step.started', stepStartedFields(step), key))) {
      return { kind: 'stopped', cause: this.stopCause ?? { kind: 'cancelled' } };
    }
    ctx.working();
    const startedAt = performance.now();
    let result: ExecResult;
    try {
      result = await this.driver.exec(handle, {
        argv: step.argv,
        env: step.env,
        workdir: step.workdir,
        timeoutMs: step.timeoutMs,
        maxOutputBytes: config.CAIRN_STEP_OUTPUT_MAX_BYTES,
      });
    } catch (error) {
      // Destroyed under the step by a cancel or a lost lease: the run stopped, it did not fail; the
      // step still gets its receipt (every step.started has one).
      if (this.stopCause !== null) {
        const cause = this.stopCause;
        const fields = interruptedStepFields(step, performance.now() - startedAt, await artifacts.put(EMPTY));
        await this.appendOwn('record', 'step.completed', fields, key);
        return { kind: 'stopped', cause };
      }
      const code: ErrorCode = isCairnError(error) && error.code === 'E_RUNTIME_ABSENT' ? 'E_RUNTIME_ABSENT' : 'E_INTERNAL';
      return { kind: 'failed', code, message: `step ${step.index} could not run: ${describe(error)}`, stepIndex: step.index };
    }
    ctx.working();
    const [stdoutSha256, stderrSha256] = await Promise.all([artifacts.put(result.stdout), artifacts.put(result.stderr)]);
    await this.appendOwn('record', 'step.completed', stepCompletedFields(step, result, { stdoutSha256, stderrSha256 }), key);
    this.completed.push({ exitCode: result.exitCode });
    if (result.limitHit !== null) {
      if (result.teardown !== null) this.teardown ??= Promise.resolve(result.teardown);
      const seen = result.limits.find((limit) => limit.limit === result.limitHit)?.evidence ?? result.limitHit;
      return { kind: 'failed', code: result.limitHit, message: `step ${step.index} hit a cap (${seen}); the sandbox was destroyed`, stepIndex: step.index };
    }
    return null;
  }

  /** Every output path's regular files, bounded, into the artifact store: path → sha256. */
  private async collectOutputs(handle: SandboxHandle): Promise<Record<string, string>> {
    const { plan, artifacts, config } = this.deps;
    const hashes: Record<string, string> = {};
    if (plan.outputs.length === 0) return hashes;
    const files = await this.driver.getFiles(handle, plan.outputs, config.CAIRN_OUTPUT_FILES_MAX_BYTES);
    for (const file of files) hashes[file.path] = await artifacts.put(file.content);
    return hashes;
  }

  /**
   * The runtime's own failure mid-run (artifact store, a receipt too large to store, a broken
   * chain) ends the run on the record. A broker outage cannot be recorded: it is rethrown, and the
   * redelivered placement then fails the run E_WORKER_LOST.
   */
  private internalFailure(error: unknown): Outcome {
    if (isCairnError(error) && error.code === 'E_UNAVAILABLE') throw error;
    this.deps.logger.write('error', 'the run failed inside the runtime', { run_id: this.runId, error: describe(error) });
    const code: ErrorCode = isCairnError(error) && error.code === 'E_UNKNOWN_STATE' ? 'E_UNKNOWN_STATE' : 'E_INTERNAL';
    return { kind: 'failed', code, message: `the runtime failed during the run: ${describe(error)}` };
  }

  /** Between steps: has someone else written (a cancel request this watch missed, a lost worker)? */
  private async endedElsewhere(): Promise<StopCause | null> {
    const head = await this.deps.log.head(this.runId);
    if (head === null || head.seq <= this.lastSeq) return null;
    const chain = await this.readChain();
    const stop = stopCauseOf(chain);
    if (stop !== null) this.stop(stop);
    else this.lastSeq = Math.max(this.lastSeq, chain.at(-1)?.seq ?? 0);
    return stop;
  }

  /**
   * Appends one of this run's receipts onto the head it last saw. When someone else wrote
   * meanwhile, reads the chain (and stops the run if it says so): a `progress` receipt is then
   * dropped if the run is to stop, a `record` one only if the run is sealed; otherwise it goes
   * onto the new head. Returns whether it was appended.
   */
  private async appendOwn(kind: OwnReceipt, type: EventType, fields: Record<string, unknown>, key?: string): Promise<boolean> {
    for (let reads = 0; ; reads++) {
      try {
        this.lastSeq = (await this.deps.ctx.appendAt(this.lastSeq, type, fields, key)).receipt.seq;
        return true;
      } catch (error) {
        if (!isHeadMoved(error) || reads >= MAX_READS) throw error;
      }
      const chain = await this.readChain();
      const stop = stopCauseOf(chain);
      if (stop !== null) this.stop(stop);
      const drop = kind === 'progress' ? stop !== null : foldRun(chain)?.sealed === true;
      if (drop) {
        this.deps.logger.write('warn', `not recording ${type}: the run moved on`, { run_id: this.runId, cause: stop?.kind ?? 'sealed' });
        return false;
      }
      this.lastSeq = chain.at(-1)?.seq ?? 0;
    }
  }

  private async readChain(): Promise<EvidenceReceipt[]> {
    const parsed = parseChain(await this.deps.ctx.readChain());
    if (!parsed.ok) throw new CairnError('E_UNKNOWN_STATE', `run ${this.runId} holds a receipt that breaks its contract: ${parsed.message}`);
    return parsed.receipts;
  }

  private stop(cause: StopCause): void {
    if (this.stopCause !== null) return;
    this.stopCause = cause;
    this.deps.logger.write('warn', 'stopping a run', { run_id: this.runId, cause: cause.kind });
    if (this.handle !== null) void this.destroy();
  }

  /** Destroys the sandbox once (I-8); every later call gets the same verdict. */
  private destroy(): Promise<DestroyResult> {
    const handle = this.handle;
    if (handle === null) return Promise.resolve({ verifiedGone: true });
    this.teardown ??= this.driver.destroy(handle).catch((error: unknown) => {
      this.deps.logger.write('error', 'sandbox teardown failed', { run_id: this.runId, container: handle.name, error: describe(error) });
      return { verifiedGone: false };
    });
    return this.teardown;
  }

  private async stopWatching(): Promise<void> {
    this.watch.stop();
    await this.keeper.stop();
  }

  /** `sandbox.destroyed` of the recorded sandbox, onto the chain as it is now — unless the run was sealed meanwhile. */
  private async recordTeardown(handle: SandboxHandle, gone: DestroyResult, outcome: Outcome, durationMs: number): Promise<void> {
    const { ctx, logger } = this.deps;
    await ctx.reactOnChain(async ({ receipts, headSeq }) => {
      const parsed = parseChain(receipts);
      if (parsed.ok && foldRun(parsed.receipts)?.sealed === true) {
        logger.write('warn', 'the run was sealed before its teardown could be recorded', { run_id: this.runId, container: handle.name, verified_gone: gone.verifiedGone });
        return;
      }
      const fields = sandboxDestroyedFields(handle.name, gone.verifiedGone, teardownReason(outcome, parsed.ok ? parsed.receipts : []), durationMs);
      this.lastSeq = (await ctx.appendAt(headSeq, 'sandbox.destroyed', fields, 'teardown')).receipt.seq;
    }, MAX_READS);
  }

  /**
   * The run's last receipt from this worker, decided from the chain as it is when appended
   * (`decideEnding`): someone else may have ended it, or asked to cancel it, meanwhile. A lost
   * lease is the scheduler's to settle: this worker records nothing more and keeps its hands off
   * the lease.
   */
  private async end(outcome: Outcome, durationMs: number): Promise<void> {
    const { ctx, logger } = this.deps;
    if (outcome.kind === 'stopped' && outcome.cause.kind === 'lease_lost') return;
    await ctx.reactOnChain(async ({ receipts, headSeq }) => {
      const parsed = parseChain(receipts);
      if (!parsed.ok) throw new CairnError('E_UNKNOWN_STATE', `run ${this.runId} holds a receipt that breaks its contract: ${parsed.message}`);
      const ending = decideEnding(parsed.receipts, outcome.kind);
      switch (ending.kind) {
        case 'none':
          logger.write('info', 'no ending recorded by this worker', { run_id: this.runId, outcome: outcome.kind, reason: ending.reason });
          return;
        case 'cancelled':
          await answerCancel(ctx, ending.request, headSeq);
          logger.write('info', 'run cancelled', { run_id: this.runId, request: `${this.runId}:${ending.request.seq}` });
          return;
        case 'failed':
          if (outcome.kind !== 'failed') throw new CairnError('E_INTERNAL', `a ${outcome.kind} run cannot end failed`);
          await ctx.appendAt(headSeq, 'run.failed', runFailedFields(outcome.code, outcome.message, outcome.stepIndex), 'failed');
          return;
        case 'executed':
          if (outcome.kind !== 'executed') throw new CairnError('E_INTERNAL', `a ${outcome.kind} run cannot end executed`);
          await ctx.appendAt(headSeq, 'run.executed', runExecutedFields(this.completed, outcome.artifactHashes, durationMs));
          return;
      }
    }, MAX_READS);
    await this.releaseLease();
  }

  private async releaseLease(): Promise<void> {
    await this.deps.leases.delete(this.runId, this.deps.scheduled.lease_id).catch((error: unknown) => {
      this.deps.logger.write('warn', 'could not release the lease', { run_id: this.runId, error: describe(error) });
    });
  }
}

/** Why the sandbox went: the run completed or failed as it went, or it was stopped — cancelled when a cancel stopped it. */
function teardownReason(outcome: Outcome, chain: readonly EvidenceReceipt[]): TeardownReason {
  if (outcome.kind === 'executed') return decideEnding(chain, 'executed').kind === 'cancelled' ? 'cancelled' : 'completed';
  if (outcome.kind === 'stopped' && outcome.cause.kind === 'cancelled') return 'cancelled';
  return 'failed';
}

/** What a failed create means on the record. */
function createFailureCode(error: unknown): ErrorCode {
  if (isCairnError(error) && (error.code === 'E_IMAGE_PULL' || error.code === 'E_RUNTIME_ABSENT')) return error.code;
  return 'E_SANDBOX_START';
}

/** A file transfer that hit a cap ends the run with that cap; any other failure is the runtime's. */
function transferFailure(error: unknown, what: string): Extract<Outcome, { kind: 'failed' }> {
  if (isCairnError(error) && (isLimit(error.code) || error.code === 'E_BUDGET' || error.code === 'E_RUNTIME_ABSENT')) {
    return { kind: 'failed', code: error.code, message: `${what}: ${error.message}` };
  }
  return { kind: 'failed', code: what.includes('input') ? 'E_SANDBOX_START' : 'E_INTERNAL', message: `${what}: ${describe(error)}` };
}

export function describe(error: unknown): string {
  if (isCairnError(error)) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
