import type { ArtifactStore } from '@cairn/artifact-store';
import { CairnError, isCairnError } from '@cairn/contracts';
import type { ErrorCode, EventType, EvidenceReceipt, EvidenceReceiptOf, Redaction, SandboxHardening } from '@cairn/contracts';
import { verifyChain } from '@cairn/evidence';
import type { EvidenceLog } from '@cairn/evidence-log';
import { isHeadMoved, isNotAReceipt } from '@cairn/evidence-log';
import { foldRun } from '@cairn/lifecycle';
import type { LeaseStore } from '@cairn/operational';
import { LIMIT_CODES } from '@cairn/sandbox';
import type { DestroyResult, ExecResult, LimitCode, SandboxDriver, SandboxHandle } from '@cairn/sandbox';
import type { EgressDenial } from '@cairn/sandbox-docker';
import { OutputScanner } from '@cairn/secrets';
import type { ScannedSecret } from '@cairn/secrets';
import { chainBreakText, recordChainBreak } from '@cairn/service-kit';
import type { JsonLogger, ReactionContext } from '@cairn/service-kit';
import type { NatsConnection } from '@nats-io/transport-node';
import { CancelWatch } from './cancel-watch.adapter.js';
import { ChainWake } from './chain-wake.adapter.js';
import { LeaseKeeper } from './lease-keeper.js';
import { answerCancel } from './lost-run.js';
import { approvalGranted, decideEnding, parseChain, stopCauseOf, unknownStateEnding } from './run-assessment.js';
import type { RunPlan, StepApprovalPlan, StopCause } from './run-assessment.js';
import {
  egressDeniedFields,
  interruptedStepFields,
  runExecutedFields,
  runFailedFields,
  sandboxCaps,
  sandboxCreatedFields,
  sandboxDestroyedFields,
  stepApprovalKey,
  stepCompletedFields,
  stepStartedFields,
  unstoredStepFields,
} from './runtime-receipts.builder.js';
import type { CompletedStep, TeardownReason } from './runtime-receipts.builder.js';
import type { RuntimeConfig } from './runtime.config.js';
import { recordableOutputs } from './output-names.js';
import { putStreams } from './output-store.js';
import { describeRedactions, redactFiles, redactStepResult, secretAlertFields, secretRedactedFields, withRedactions } from './output-redaction.js';
import type { SecretValuesReader } from '@cairn/secret-store';
import { confirmedHardening } from './sandbox-hardening.js';
import type { SandboxEngine } from './sandbox-engine.adapter.js';
import { breachMessage, budgetBreach, budgetedTimeout, budgetStepFields, holdSeconds } from './step-budget.js';
import { sandboxLifetimeSeconds } from './step-plan.js';
import type { PlannedStep } from './step-plan.js';
import { describeLeaks, LeakGuard, leakRedactedFields } from './leak-guard.js';

export interface RunExecutionDeps {
  ctx: ReactionContext;
  scheduled: EvidenceReceiptOf<'run.scheduled'>;
  /** The chain's last seq when it was assessed: this run's first receipt is appended onto it. */
  assessedSeq: number;
  plan: RunPlan;
  engine: SandboxEngine;
  artifacts: ArtifactStore;
  /** The run's secrets come from here (its tenant's, the names policy allowed). */
  secrets: SecretValuesReader;
  leases: LeaseStore;
  log: EvidenceLog;
  nc: NatsConnection;
  config: RuntimeConfig;
  logger: JsonLogger;
}

type Outcome =
  /** `sandboxEnded`: the workload ended its own sandbox (see `sandboxEnded`); the steps after it never ran. */
  | { kind: 'executed'; artifactHashes: Record<string, string>; outputsSkipped?: number; sandboxEnded?: SandboxEnded }
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
/** A held step re-reads its chain at least this often, besides waking on every receipt that lands. */
const HOLD_POLL_MS = 2000;

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
  private readonly wake: ChainWake;
  private stopCause: StopCause | null = null;
  /** When the sandbox was created (epoch ms): the run's time budget counts from here. */
  private sandboxStartedAt: number | null = null;
  /** How much longer this run's steps may be held for approval, all holds together. */
  private holdLeftMs: number;
  private handle: SandboxHandle | null = null;
  private teardown: Promise<DestroyResult> | null = null;
  private readonly completed: CompletedStep[] = [];
  /** The step whose command runs now (for `egress.denied`); null between steps. */
  private runningStep: number | null = null;
  /** Egress refusals seen, and the appends of those recorded (one after another). */
  private denialsSeen = 0;
  private denials: Promise<void> = Promise.resolve();
  /** The chain seq this run last saw as the head (its own last receipt, or the head it read). */
  private lastSeq: number;
  /** Why the chain could not be read, once a receipt breaking its contract was met (I-5: nothing more runs). */
  private unreadable: string | null = null;
  /** The run's secrets (read when it starts, zeroed when it ends) and the scanner output meets first. */
  private secretValues: ScannedSecret[] = [];
  private scanner = new OutputScanner([]);
  /** Scans what this run appends and logs beyond its output (names, hosts, messages); a hit ends it E_SECRET_SEEN. */
  private readonly guard: LeakGuard;
  /** `secret.redacted` receipts of the guard's findings appended so far (their keys). */
  private leaksRecorded = 0;
  private readonly deps: RunExecutionDeps;

  constructor(deps: RunExecutionDeps) {
    this.guard = new LeakGuard(
      () => this.scanner,
      () => this.stop({ kind: 'secret_seen' }),
    );
    // Every line this run logs is redacted first: a host or a file name in a message is the workload's.
    this.deps = { ...deps, logger: deps.logger.filtered(this.guard.logFilter) };
    const { ctx, scheduled, config, leases, logger, nc, log } = this.deps;
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
    this.watch = new CancelWatch(
      nc,
      log.chainSubjects(ctx.chainId),
      () => this.stop({ kind: 'cancelled' }),
      () => void this.checkStoredChain(),
    );
    this.wake = new ChainWake(nc, log.chainSubjects(ctx.chainId));
    this.holdLeftMs = config.CAIRN_STEP_HOLD_MAX_SECONDS * 1000;
  }

  private get runId(): string {
    return this.deps.ctx.chainId;
  }

  /** Runs the run; resolves once its receipts are stored (or it was not this worker's to run). */
  async run(): Promise<void> {
    // Watching from the start, then one look at the head: a cancel that landed since the chain was
    // assessed is seen before anything starts, and one landing later while it runs.
    this.watch.start();
    if (this.deps.plan.stepApprovals.length > 0) this.wake.start();
    try {
      await this.runWatched();
    } finally {
      await this.stopWatching();
      for (const secret of this.secretValues) secret.value.fill(0);
      this.secretValues = [];
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
      // With egress, the sandbox's own internal network, firewall and proxy come up first; if any
      // cannot, the create fails (E_SANDBOX_START) and the run never runs unconfined.
      const egress =
        plan.network === 'none'
          ? undefined
          : {
              allow: plan.network.egress,
              allowPrivate: plan.network.allowPrivate,
              onDenied: (d: EgressDenial) => this.recordDenial(d),
              // Its egress fails closed from here on (connections refused); the operator must hear of it.
              onProxyLost: (reason: string) => logger.write('error', 'the egress proxy of a run died: its egress is refused from now on', { run_id: this.runId, reason }),
            };
      this.handle = await this.deps.engine.createSandbox(
        {
          image: prepared.imageId,
          caps: sandboxCaps(plan.caps),
          labels: { workerId: this.workerId, chainId: this.runId },
          // `cairn-<run>-<attempt>` (ADR 0035): a lost attempt's container, left to its worker's
          // reaper on a shared engine, never takes the name the next attempt's sandbox needs.
          instance: this.deps.scheduled.attempt,
          // A step held for approval keeps its sandbox: its PID 1 must outlive the holds too.
          lifetimeSeconds: sandboxLifetimeSeconds(plan.steps) + this.holdSecondsAtMost(),
        },
        egress,
      );
      // Only now, with a warm sandbox it claimed out of the pool, is what the pool holds beside this run known.
      this.deps.engine.trimPool();
      this.sandboxStartedAt = Date.now();
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
        const network = plan.network === 'none' ? 'none' : 'egress_proxy';
        recorded = await this.appendOwn('progress', 'sandbox.created', sandboxCreatedFields(handle, plan.image, hardening.hardening, network));
        outcome = recorded
          ? await this.execute(handle).catch((error: unknown) => this.internalFailure(error))
          : { kind: 'stopped', cause: this.stopCause ?? { kind: 'cancelled' } };
      }
    } finally {
      // I-8: whatever happened above — also an append that failed and will be retried (and then,
      // finding `sandbox.created`, fail the run E_WORKER_LOST) — the sandbox goes, verified.
      await this.destroy();
      // The proxy went with the sandbox: every refusal it reported is on the chain before the teardown.
      await this.denials;
      try {
        // A message on the chain that is not a receipt: the break and the run's failure on the record first,
        // while the lease is still kept, so the teardown can follow them (ADR 0033).
        if ((this.stopCause as StopCause | null)?.kind === 'chain_broken') await this.recordBreak();
      } finally {
        await this.keeper.stop();
      }
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
      imageId = await engine.imageId(plan.image, plan.imageDigest);
    } catch (error) {
      return { kind: 'failed', code: isCairnError(error) && error.code === 'E_RUNTIME_ABSENT' ? 'E_RUNTIME_ABSENT' : 'E_IMAGE_PULL', message: describe(error) };
    }
    if (plan.imageDigest !== null && imageId !== plan.imageDigest) {
      return { kind: 'failed', code: 'E_IMAGE_PULL', message: `image ${plan.image} on worker ${this.workerId} is ${imageId}, not the granted ${plan.imageDigest}` };
    }
    // The run's secrets, of its tenant, before any sandbox: a name deleted since policy allowed it
    // refuses the run (REJECTED, nothing ran); a worker without the key file cannot run it.
    if (plan.secrets.length > 0) {
      try {
        this.secretValues = await this.deps.secrets.read(this.deps.scheduled.tenant, plan.secrets);
      } catch (error) {
        if (isCairnError(error) && error.code === 'E_UNAVAILABLE') throw error;
        const code: ErrorCode = isCairnError(error) && error.code === 'E_NOT_FOUND' ? 'E_POLICY_DENIED' : isCairnError(error) && error.code === 'E_RUNTIME_ABSENT' ? 'E_RUNTIME_ABSENT' : 'E_INTERNAL';
        return { kind: 'failed', code, message: `the run's secrets cannot be provided: ${describe(error)}` };
      }
    }
    this.scanner = new OutputScanner(this.secretValues);
    // A sandbox of this run left by a crash before `sandbox.created` was recorded: no step ran in it.
    await this.driver.reapChain(this.workerId, this.runId).catch((error: unknown) => {
      this.deps.logger.write('warn', 'could not reap leftovers before create', { run_id: this.runId, error: describe(error) });
    });
    return { kind: 'ready', imageId };
  }

  /** The isolation the engine reports, confirmed before any step runs (a sandbox short of it runs nothing). */
  private async hardening(handle: SandboxHandle): Promise<{ kind: 'ok'; hardening: SandboxHardening } | Extract<Outcome, { kind: 'failed' }>> {
    try {
      const egress = this.deps.engine.egressOf(handle);
      const network = egress?.network ?? 'none';
      if (this.deps.plan.network !== 'none' && (network === 'none' || egress?.proxyAlive !== true)) throw new CairnError('E_SANDBOX_START', 'the sandbox has no egress network, or its proxy is gone');
      return { kind: 'ok', hardening: confirmedHardening(await this.deps.engine.inspectSandbox(handle), handle.caps, network) };
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
    try {
      await this.deps.engine.putSecrets(handle, this.secretValues);
    } catch (error) {
      if (this.stopCause !== null) return { kind: 'stopped', cause: this.stopCause };
      return transferFailure(error, 'writing the secrets (input)');
    }
    for (const step of plan.steps) {
      const stop = this.stopCause ?? (await this.endedElsewhere());
      if (stop !== null) return { kind: 'stopped', cause: stop };
      const approval = plan.stepApprovals.find((a) => a.step_index === step.index);
      if (approval !== undefined) {
        const held = await this.holdForApproval(approval);
        if (held !== null) return held;
      }
      const outcome = await this.runStep(handle, step);
      if (outcome !== null) return outcome;
    }
    if (this.stopCause !== null) return { kind: 'stopped', cause: this.stopCause };
    if ((await this.endedElsewhere()) !== null) return { kind: 'stopped', cause: this.stopCause ?? { kind: 'cancelled' } };
    try {
      return { kind: 'executed', ...(await this.collectOutputs(handle)) };
    } catch (error) {
      if (this.stopCause !== null) return { kind: 'stopped', cause: this.stopCause };
      // Ended after its last step (a background process of the workload stopped it): nothing to collect.
      return (await this.endedByWorkload(handle, error, 'collecting the outputs')) ?? transferFailure(error, 'collecting the outputs');
    }
  }

  /** One step and its two receipts; returns how the run ends if it ends here, else null. */
  private async runStep(handle: SandboxHandle, step: PlannedStep): Promise<Outcome | null> {
    const { ctx, artifacts, config, plan } = this.deps;
    const key = `step-${step.index}`;
    const remainingMs = this.runTimeLeftMs();
    if (remainingMs !== null && remainingMs <= 0) {
      const message = `the run's time budget (${plan.budget.runSeconds ?? 0} s: the job's time or the tenant's CPU-seconds for the day) ran out before step ${step.index}`;
      return { kind: 'failed', code: 'E_BUDGET', message, stepIndex: step.index };
    }
    const timeout = budgetedTimeout(step.timeoutMs, remainingMs);
    if (!(await this.appendOwn('progress', 'step.started', stepStartedFields(step), key))) {
      return { kind: 'stopped', cause: this.stopCause ?? { kind: 'cancelled' } };
    }
    ctx.working();
    const startedAt = performance.now();
    let result: ExecResult;
    this.runningStep = step.index;
    try {
      result = await this.driver
        .exec(handle, {
          argv: step.argv,
          env: step.env,
          workdir: step.workdir,
          timeoutMs: timeout.timeoutMs,
          maxOutputBytes: config.CAIRN_STEP_OUTPUT_MAX_BYTES,
          // The output budget stops the step the moment it is passed, not at its time cap.
          ...(plan.budget.outputBytesPerStep === null ? {} : { stopAfterOutputBytes: plan.budget.outputBytesPerStep }),
        })
        .finally(() => {
          this.runningStep = null;
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
      const ended = await this.endedByWorkload(handle, error, `step ${step.index}`, step.index);
      if (ended !== null) {
        // The step's result: its receipt says it never exited; what it wrote went with the sandbox.
        const fields = interruptedStepFields(step, performance.now() - startedAt, await artifacts.put(EMPTY));
        await this.appendOwn('record', 'step.completed', fields, key);
        this.completed.push({ exitCode: null });
        return ended;
      }
      const code: ErrorCode = isCairnError(error) && error.code === 'E_RUNTIME_ABSENT' ? 'E_RUNTIME_ABSENT' : 'E_INTERNAL';
      return { kind: 'failed', code, message: `step ${step.index} could not run: ${describe(error)}`, stepIndex: step.index };
    }
    ctx.working();
    // Redaction before hashing: what is stored, hashed and appended is the scanned output.
    const scanned = redactStepResult(this.scanner, result);
    result = scanned.result;
    const stored = await putStreams(artifacts, result.stdout, result.stderr);
    if (stored.full) {
      // The step ran, but its output has nowhere to go: its receipt says so, and the run stops here.
      if (result.teardown !== null) this.teardown ??= Promise.resolve(result.teardown);
      await this.appendOwn('record', 'step.completed', withRedactions(unstoredStepFields(step, result, stored.stdoutSha256), scanned.redactions), key);
      this.completed.push({ exitCode: result.exitCode });
      if (scanned.redactions.length > 0) return this.secretSeen(scanned.redactions, `the output of step ${step.index}`, step.index);
      const message = `step ${step.index}: the artifact store ${this.deps.config.CAIRN_ARTIFACT_BUCKET} is full (CAIRN_ARTIFACT_STORE_MAX_BYTES ${this.deps.config.CAIRN_ARTIFACT_STORE_MAX_BYTES}): its output was not kept`;
      return { kind: 'failed', code: 'E_CAPACITY', message, stepIndex: step.index };
    }
    const fields = stepCompletedFields(step, result, stored);
    const breach = budgetBreach(result, plan.budget, timeout.byBudget);
    await this.appendOwn('record', 'step.completed', withRedactions(breach === null ? fields : budgetStepFields(fields, breach), scanned.redactions), key);
    this.completed.push({ exitCode: result.exitCode });
    if (scanned.redactions.length > 0) {
      if (result.teardown !== null) this.teardown ??= Promise.resolve(result.teardown);
      return this.secretSeen(scanned.redactions, `the output of step ${step.index}`, step.index);
    }
    if (breach !== null) {
      // ROLLBACK E_BUDGET: the sandbox goes (in `finally`, verified), the receipts stay.
      if (result.teardown !== null) this.teardown ??= Promise.resolve(result.teardown);
      return { kind: 'failed', code: 'E_BUDGET', message: breachMessage(step.index, breach), stepIndex: step.index };
    }
    if (result.limitHit !== null) {
      if (result.teardown !== null) this.teardown ??= Promise.resolve(result.teardown);
      const seen = result.limits.find((limit) => limit.limit === result.limitHit)?.evidence ?? result.limitHit;
      return { kind: 'failed', code: result.limitHit, message: `step ${step.index} hit a cap (${seen}); the sandbox was destroyed`, stepIndex: step.index };
    }
    return null;
  }

  /** Milliseconds left of the run's time budget (from its sandbox's creation); null: no such budget. */
  private runTimeLeftMs(): number | null {
    const seconds = this.deps.plan.budget.runSeconds;
    if (seconds === null) return null;
    return seconds * 1000 - (Date.now() - (this.sandboxStartedAt ?? Date.now()));
  }

  /** The longest this run's steps may be held for approval in all: what the sandbox must outlive. */
  private holdSecondsAtMost(): number {
    const asked = this.deps.plan.stepApprovals.reduce((sum, approval) => sum + approval.timeout_seconds, 0);
    return Math.min(asked, this.deps.config.CAIRN_STEP_HOLD_MAX_SECONDS);
  }

  /**
   * A step marked `apply` that policy holds (PRODUCT.md "Jobs and approvals"): `approval.requested`
   * (scope `step`) before it — the run goes AWAITING_APPROVAL with its sandbox kept, so the step
   * acts on what the steps before it made — then waits for the decision. A grant lets the step run;
   * a rejection, a cancel, or no decision by `expires_at` stops the run (the timeout is recorded as
   * `approval.rejected`, `cause: timeout`, the same logical event the scheduler's timer appends, so
   * it is stored once). The hold lasts the rule's timeout, and all of a run's holds together at
   * most CAIRN_STEP_HOLD_MAX_SECONDS: a held sandbox keeps a worker slot. Returns how the run ends
   * if it ends here, or null when the step may run.
   */
  private async holdForApproval(approval: StepApprovalPlan): Promise<Outcome | null> {
    const { logger } = this.deps;
    const heldAt = Date.now();
    const seconds = holdSeconds(approval.timeout_seconds, this.holdLeftMs);
    const fields = {
      approval_id: approval.approval_id,
      scope: 'step',
      step_index: approval.step_index,
      reason: approval.reason,
      expires_at: new Date(heldAt + seconds * 1000).toISOString(),
    };
    if (!(await this.appendOwn('progress', 'approval.requested', fields, stepApprovalKey(approval.approval_id, this.deps.scheduled.attempt)))) {
      return { kind: 'stopped', cause: this.stopCause ?? { kind: 'cancelled' } };
    }
    logger.write('info', 'step held for approval', { run_id: this.runId, step: approval.step_index, approval_id: approval.approval_id, expires_at: fields.expires_at });
    try {
      for (;;) {
        if (this.stopCause !== null) return { kind: 'stopped', cause: this.stopCause };
        this.deps.ctx.working();
        const chain = await this.readChain();
        const stop = stopCauseOf(chain);
        if (stop !== null) {
          this.stop(stop);
          return { kind: 'stopped', cause: stop };
        }
        this.lastSeq = Math.max(this.lastSeq, chain.at(-1)?.seq ?? 0);
        if (approvalGranted(chain, approval.approval_id)) {
          logger.write('info', 'step approved', { run_id: this.runId, step: approval.step_index, approval_id: approval.approval_id });
          return null;
        }
        const request = chain.findLast((r): r is EvidenceReceiptOf<'approval.requested'> => r.type === 'approval.requested' && r.approval_id === approval.approval_id);
        const left = (request === undefined ? heldAt + seconds * 1000 : Date.parse(request.expires_at)) - Date.now();
        if (left <= 0 && request !== undefined) await this.rejectExpired(request);
        else await this.wake.next(Math.min(Math.max(left, 0), HOLD_POLL_MS));
      }
    } finally {
      this.holdLeftMs = Math.max(0, this.holdLeftMs - (Date.now() - heldAt));
    }
  }

  /** No decision by the deadline: the timeout's rejection, caused by the request (as the scheduler's timer would append it). */
  private async rejectExpired(request: EvidenceReceiptOf<'approval.requested'>): Promise<void> {
    const fields = { approval_id: request.approval_id, rejected_by: this.deps.ctx.service, cause: 'timeout' };
    if (!(await this.fenced('approval.rejected'))) return;
    try {
      this.lastSeq = (await this.deps.ctx.causedBy(request).appendAt(this.lastSeq, 'approval.rejected', fields, request.approval_id)).receipt.seq;
    } catch (error) {
      // Someone decided (or the scheduler timed it out) meanwhile: the next read sees it.
      if (!isHeadMoved(error)) throw error;
    }
  }

  /**
   * A connection the egress proxy refused (PRODUCT.md: E_EGRESS, RUNNING — drop it, record it): an
   * `egress.denied` receipt, appended in the order seen, without stopping the run. At most
   * CAIRN_EGRESS_DENIALS_RECORDED per run go on the chain, so a sandbox cannot flood it.
   */
  private recordDenial(denial: EgressDenial): void {
    const { logger, config } = this.deps;
    const n = ++this.denialsSeen;
    const stepIndex = this.runningStep;
    logger.write('warn', 'egress refused', { run_id: this.runId, host: denial.host, port: denial.port, reason: denial.reason, step_index: stepIndex });
    if (n > config.CAIRN_EGRESS_DENIALS_RECORDED) {
      if (n === config.CAIRN_EGRESS_DENIALS_RECORDED + 1) logger.write('warn', 'egress refusals past the recorded maximum are only logged', { run_id: this.runId });
      return;
    }
    this.denials = this.denials
      .then(() => this.appendOwn('record', 'egress.denied', egressDeniedFields(denial, stepIndex), `egress-${n}`))
      .then(
        () => undefined,
        (error: unknown) => logger.write('error', 'could not record an egress refusal', { run_id: this.runId, error: describe(error) }),
      );
  }

  /**
   * Every output path's regular files, bounded, into the artifact store: path → sha256. A file whose
   * name a receipt cannot record as it is (output-names.ts) is not collected, only counted.
   */
  private async collectOutputs(handle: SandboxHandle): Promise<{ artifactHashes: Record<string, string>; outputsSkipped?: number }> {
    const { plan, artifacts, config, logger } = this.deps;
    const hashes: Record<string, string> = {};
    if (plan.outputs.length === 0) return { artifactHashes: hashes };
    const recordable = recordableOutputs(await this.driver.getFiles(handle, plan.outputs, config.CAIRN_OUTPUT_FILES_MAX_BYTES));
    const skipped = Object.values(recordable.skipped).reduce((sum, n) => sum + n, 0);
    if (skipped > 0) logger.write('warn', 'output files not collected: their names cannot be recorded', { run_id: this.runId, skipped: recordable.skipped });
    // Redaction before hashing: only the scanned bytes are stored; a hit stops the run.
    const { files, redactions } = redactFiles(this.scanner, recordable.files);
    for (const file of files) hashes[file.path] = await artifacts.put(file.content);
    if (redactions.length > 0) {
      const failed = await this.secretSeen(redactions, 'the collected outputs');
      throw new CairnError('E_SECRET_SEEN', failed.message);
    }
    return skipped > 0 ? { artifactHashes: hashes, outputsSkipped: skipped } : { artifactHashes: hashes };
  }

  /**
   * A secret or key pattern was seen (PRODUCT.md "Critical alerts"): one `secret.redacted` per
   * finding and an `alert.raised` (critical) on the chain, a `fatal` log line — names, patterns and
   * counts, never the value — and the run stops: ROLLBACK E_SECRET_SEEN, the sandbox destroyed.
   */
  private async secretSeen(redactions: readonly Redaction[], where: string, stepIndex?: number): Promise<Extract<Outcome, { kind: 'failed' }>> {
    const prefix = stepIndex === undefined ? 'outputs' : `step-${stepIndex}`;
    for (const [i, redaction] of redactions.entries()) {
      await this.appendOwn('record', 'secret.redacted', secretRedactedFields(redaction, stepIndex), `secret-${prefix}-${i}`);
    }
    await this.appendOwn('record', 'alert.raised', secretAlertFields(redactions, where), `alert-secret-${prefix}`);
    const message = `E_SECRET_SEEN: ${describeRedactions(redactions, where)}; redacted before hashing, and the run is stopped`;
    this.deps.logger.write('fatal', 'secret seen in output: redacted, run stopped', {
      run_id: this.runId,
      error_code: 'E_SECRET_SEEN',
      step_index: stepIndex ?? null,
      where: [...new Set(redactions.map((r) => (r.stream === 'file' ? (r.path ?? 'file') : r.stream)))],
      patterns: [...new Set(redactions.map((r) => r.pattern))],
      secrets: [...new Set(redactions.flatMap((r) => (r.secret === undefined ? [] : [r.secret])))],
    });
    return { kind: 'failed', code: 'E_SECRET_SEEN', message, ...(stepIndex === undefined ? {} : { stepIndex }) };
  }

  /**
   * The workload ended its own sandbox — `kill -TERM 1` (the init passes it on and the sandbox
   * stops), `kill -9 -1` (which also kills the exec agent, docs/adr/0005) — and no cap explains it.
   * That is what the user's work did, not a failure of Cairn's (docs/testing.md, "A workload that
   * ends its own sandbox"): like a step that exits non-zero, the run ends executed with what it did
   * — the step's receipt (`exit_code: null`), no later step, nothing collected — and is verified,
   * graded and sealed on that. An engine that went away is not this (`E_RUNTIME_ABSENT` stays).
   */
  private async endedByWorkload(handle: SandboxHandle, error: unknown, when: string, stepIndex?: number): Promise<Outcome | null> {
    if (!isCairnError(error) || error.code !== 'E_NOT_FOUND') return null;
    // Stopped, not removed: its init ended. Nothing in the sandbox can remove it; something outside did.
    const state = await this.deps.engine.endedState(handle).catch(() => null);
    if (state?.kind !== 'stopped') return null;
    this.deps.logger.write('warn', 'the workload ended its own sandbox', {
      run_id: this.runId,
      when,
      step_index: stepIndex ?? null,
      sandbox_exit_code: state.exitCode,
      error: describe(error),
    });
    return { kind: 'executed', artifactHashes: {}, sandboxEnded: stepIndex === undefined ? { when } : { when, stepIndex } };
  }

  /**
   * The runtime's own failure mid-run (artifact store, a receipt too large to store, a broken
   * chain) ends the run on the record. A broker outage cannot be recorded: it is rethrown, and the
   * redelivered placement then fails the run E_WORKER_LOST.
   */
  private internalFailure(error: unknown): Outcome {
    if (isCairnError(error) && error.code === 'E_UNAVAILABLE') throw error;
    this.deps.logger.write('error', 'the run failed inside the runtime', { run_id: this.runId, error: describe(error) });
    const code: ErrorCode = isCairnError(error) && (error.code === 'E_UNKNOWN_STATE' || error.code === 'E_CAPACITY' || error.code === 'E_CHAIN_BROKEN') ? error.code : 'E_INTERNAL';
    return { kind: 'failed', code, message: `the runtime failed during the run: ${describe(error)}` };
  }

  /** Between steps: has someone else written (a cancel request this watch missed, a lost worker)? */
  private async endedElsewhere(): Promise<StopCause | null> {
    if (this.unreadable !== null) throw new CairnError('E_UNKNOWN_STATE', `run ${this.runId} holds a receipt that breaks its contract: ${this.unreadable}`);
    let chain: EvidenceReceipt[];
    try {
      const head = await this.deps.log.head(this.runId);
      if (head === null || head.seq <= this.lastSeq) return null;
      const stored = await this.deps.ctx.readChain();
      const problem = integrityProblem(stored, this.runId);
      if (problem !== null) {
        this.chainBroken(problem);
        return this.stopCause;
      }
      chain = this.parsedChain(stored);
    } catch (error) {
      if (!isNotAReceipt(error)) throw error;
      this.chainBroken(error.message);
      return this.stopCause;
    }
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
  private async appendOwn(kind: OwnReceipt, type: EventType, unscanned: Record<string, unknown>, key?: string): Promise<boolean> {
    // What the workload chose (a host, a path, an error's text) is redacted before it is hashed.
    const fields = this.guard.receipt(type, unscanned);
    for (let reads = 0; ; reads++) {
      if (!(await this.fenced(type))) return false;
      let stored: unknown[];
      try {
        this.lastSeq = (await this.deps.ctx.appendAt(this.lastSeq, type, fields, key)).receipt.seq;
        return true;
      } catch (error) {
        if (isNotAReceipt(error)) return this.brokenOnAppend(type, error.message);
        if (!isHeadMoved(error) || reads >= MAX_READS) throw error;
      }
      try {
        stored = await this.deps.ctx.readChain();
      } catch (error) {
        if (isNotAReceipt(error)) return this.brokenOnAppend(type, error.message);
        throw error;
      }
      // Someone else wrote: what they wrote must chain (a receipt this worker did not write whose hash does not recompute stops the run).
      const problem = integrityProblem(stored, this.runId);
      if (problem !== null) return this.brokenOnAppend(type, problem);
      const parsed = parseChain(stored);
      if (!parsed.ok) {
        // I-5: the run stops (E_UNKNOWN_STATE, decided by `end`), but what already happened — a
        // step's result — is still recorded, unless a receipt that does parse ended the run.
        const unknown = unknownStateEnding(stored);
        if (kind === 'progress' || unknown.kind === 'none') {
          throw new CairnError('E_UNKNOWN_STATE', `run ${this.runId} holds a receipt that breaks its contract: ${parsed.message}`);
        }
        this.lastSeq = Math.max(this.lastSeq, (stored.at(-1) as { seq?: number } | undefined)?.seq ?? 0);
        this.unreadable ??= parsed.message;
        continue;
      }
      const chain = parsed.receipts;
      const stop = stopCauseOf(chain);
      if (stop !== null) this.stop(stop);
      // Ended because this worker was judged lost (the scheduler, from the expired lease): nothing
      // more of this worker's belongs after that ending, not even what already happened (ADR 0019).
      const lost = this.lostOnRecord(chain);
      if (lost !== null) {
        this.deps.logger.write('warn', `not recording ${type}: the run was ended with this worker judged lost`, { run_id: this.runId, reason: lost });
        this.stop({ kind: 'lease_lost', reason: lost });
        return false;
      }
      const drop = kind === 'progress' ? stop !== null : foldRun(chain)?.sealed === true;
      if (drop) {
        this.deps.logger.write('warn', `not recording ${type}: the run moved on`, { run_id: this.runId, cause: stop?.kind ?? 'sealed' });
        return false;
      }
      this.lastSeq = chain.at(-1)?.seq ?? 0;
    }
  }

  /**
   * The lease fence (docs/adr/0019): true while this worker may still write for the run. Refused,
   * the run stops here — its sandbox destroyed, nothing more recorded by this worker, the lease
   * and the run's ending left to the scheduler.
   */
  private async fenced(what: string): Promise<boolean> {
    const lost = await this.keeper.fence();
    if (lost === null) return true;
    this.deps.logger.write('warn', `not recording ${what}: this worker no longer holds the run's lease`, { run_id: this.runId, reason: lost });
    this.stop({ kind: 'lease_lost', reason: lost });
    return false;
  }

  /** Why the chain says this placement's worker was lost (`E_WORKER_LOST` after its `run.scheduled`, or its attempt retried), or null. */
  private lostOnRecord(chain: readonly EvidenceReceipt[]): string | null {
    const placed = this.deps.scheduled.seq;
    const ending = chain.find((r) => r.seq > placed && (((r.type === 'run.failed' || r.type === 'run.cancelled') && r.error_code === 'E_WORKER_LOST') || r.type === 'run.retried'));
    return ending === undefined ? null : `${ending.type} E_WORKER_LOST by ${ending.actor} at seq ${ending.seq}`;
  }

  private async readChain(): Promise<EvidenceReceipt[]> {
    return this.parsedChain(await this.deps.ctx.readChain());
  }

  private parsedChain(stored: readonly unknown[]): EvidenceReceipt[] {
    const parsed = parseChain(stored);
    if (!parsed.ok) throw new CairnError('E_UNKNOWN_STATE', `run ${this.runId} holds a receipt that breaks its contract: ${parsed.message}`);
    return parsed.receipts;
  }

  /** Not appending `type` onto a chain that does not verify: the run stops (returns false, as a refused append does). */
  private brokenOnAppend(type: string, problem: string): false {
    this.deps.logger.write('warn', `not recording ${type}: the run's chain is broken`, { run_id: this.runId, reason: problem });
    this.chainBroken(problem);
    return false;
  }

  /** The chain does not verify: a fatal line (a critical alert, PRODUCT.md), and the run stops — its sandbox destroyed now, no step after. */
  private chainBroken(reason: string): void {
    if (this.stopCause !== null) return;
    this.deps.logger.write('fatal', 'evidence chain broken under a running run: stopping it', { run_id: this.runId, code: 'E_CHAIN_BROKEN', reason });
    this.stop({ kind: 'chain_broken', reason });
  }

  /**
   * The watch saw a message on the chain that cannot be one of its receipts: whether the chain as
   * stored is broken decides (the message may not have been stored — a refused compare-and-set —
   * or not yet: looked at now and once more a moment later). Never throws.
   */
  private async checkStoredChain(): Promise<void> {
    for (const waitMs of [0, 500]) {
      if (this.stopCause !== null) return;
      if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
      try {
        const past = await this.deps.log.readChainPastBreaks(this.runId);
        const problem = past.breaks.length > 0 ? chainBreakText(past.breaks) : integrityProblem(past.receipts.map((stored) => stored.receipt), this.runId);
        if (problem !== null) {
          this.chainBroken(problem);
          return;
        }
      } catch (error) {
        this.deps.logger.write('warn', 'could not read the chain to check a message seen on it', { run_id: this.runId, error: describe(error) });
      }
    }
  }

  /** A break whose message is not a receipt, on the record (alert.raised and run.failed E_CHAIN_BROKEN, once, whoever records it). */
  private async recordBreak(): Promise<void> {
    await recordChainBreak({ log: this.deps.log, actor: this.deps.ctx.service, logger: this.deps.logger }, this.runId);
  }

  private stop(cause: StopCause): void {
    if (this.stopCause !== null) return;
    this.stopCause = cause;
    this.wake.poke();
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
    this.wake.stop();
    await this.keeper.stop();
  }

  /** `sandbox.destroyed` of the recorded sandbox, onto the chain as it is now — unless the run was sealed meanwhile. */
  private async recordTeardown(handle: SandboxHandle, gone: DestroyResult, outcome: Outcome, durationMs: number): Promise<void> {
    const { ctx, logger } = this.deps;
    await ctx.reactOnChain(async ({ receipts, headSeq }) => {
      if (!(await this.fenced('sandbox.destroyed'))) {
        logger.write('warn', 'the sandbox of a run whose lease was lost is destroyed, not recorded', { run_id: this.runId, container: handle.name, verified_gone: gone.verifiedGone });
        return;
      }
      const parsed = parseChain(receipts);
      const lost = parsed.ok ? this.lostOnRecord(parsed.receipts) : null;
      if (lost !== null) {
        logger.write('warn', 'the sandbox of a run ended with this worker judged lost is destroyed, not recorded', { run_id: this.runId, container: handle.name, verified_gone: gone.verifiedGone, reason: lost });
        return;
      }
      const sealed = parsed.ok ? foldRun(parsed.receipts)?.sealed === true : receipts.some((r) => (r as { type?: unknown } | null)?.type === 'run.sealed');
      if (sealed) {
        logger.write('warn', 'the run was sealed before its teardown could be recorded', { run_id: this.runId, container: handle.name, verified_gone: gone.verifiedGone });
        return;
      }
      const fields = sandboxDestroyedFields(handle.name, gone.verifiedGone, parsed.ok ? teardownReason(outcome, parsed.receipts) : 'failed', durationMs);
      this.lastSeq = (await ctx.appendAt(headSeq, 'sandbox.destroyed', this.guard.receipt('sandbox.destroyed', fields), 'teardown')).receipt.seq;
    }, MAX_READS);
  }

  /**
   * The run's last receipt from this worker, decided from the chain as it is when appended
   * (`decideEnding`): someone else may have ended it, or asked to cancel it, meanwhile. A lost
   * lease is the scheduler's to settle: this worker records nothing more and keeps its hands off
   * the lease.
   */
  private async end(ended: Outcome, durationMs: number): Promise<void> {
    const { ctx, logger } = this.deps;
    if (ended.kind === 'stopped' && ended.cause.kind === 'lease_lost') return;
    if (!(await this.fenced('the run\'s ending'))) return;
    let unsettled = ended;
    if (ended.kind === 'stopped' && ended.cause.kind === 'chain_broken') {
      await this.recordBreak();
      unsettled = { kind: 'failed', code: 'E_CHAIN_BROKEN', message: boundMessage(ended.cause.reason) };
    }
    const outcome = await this.settleLeaks(this.scanned(unsettled));
    await ctx.reactOnChain(async ({ receipts, headSeq }) => {
      if (!(await this.fenced('the run\'s ending'))) return;
      const parsed = parseChain(receipts);
      if (!parsed.ok) {
        // I-5: whatever this worker's outcome, a chain it cannot read stops the run on the record.
        const unknown = unknownStateEnding(receipts);
        if (unknown.kind === 'none') {
          logger.write('info', 'no ending recorded by this worker', { run_id: this.runId, outcome: outcome.kind, reason: unknown.reason });
          return;
        }
        logger.write('error', 'the run is stopped: its chain holds a receipt that breaks its contract', { run_id: this.runId, seq: parsed.seq, reason: parsed.message });
        await ctx.appendAt(headSeq, 'run.failed', this.guard.receipt('run.failed', runFailedFields('E_UNKNOWN_STATE', unknown.message, outcome.kind === 'failed' ? outcome.stepIndex : undefined)), 'failed');
        return;
      }
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
          if (outcome.code === 'E_CHAIN_BROKEN') {
            // A critical alert (PRODUCT.md) with the failure, in one batch: the alert first, so the seal that follows the failure is last.
            await ctx.appendAllAt(headSeq, [
              { type: 'alert.raised', fields: this.guard.receipt('alert.raised', { severity: 'critical', error_code: 'E_CHAIN_BROKEN', message: outcome.message }), key: 'chain-broken' },
              { type: 'run.failed', fields: this.guard.receipt('run.failed', runFailedFields(outcome.code, outcome.message, outcome.stepIndex)), key: 'failed' },
            ]);
            return;
          }
          await ctx.appendAt(headSeq, 'run.failed', this.guard.receipt('run.failed', runFailedFields(outcome.code, outcome.message, outcome.stepIndex)), 'failed');
          return;
        case 'executed':
          if (outcome.kind !== 'executed') throw new CairnError('E_INTERNAL', `a ${outcome.kind} run cannot end executed`);
          await ctx.appendAt(headSeq, 'run.executed', this.guard.receipt('run.executed', runExecutedFields(this.completed, outcome.artifactHashes, durationMs, outcome.outputsSkipped)));
          return;
      }
    }, MAX_READS);
    await this.releaseLease();
  }

  /**
   * The outcome with what it would record scanned first — a failure's message (an error may name a
   * file the workload made), the collected files' names (keys of `artifact_hashes`) — so a finding
   * there ends the run E_SECRET_SEEN like any other.
   */
  private scanned(outcome: Outcome): Outcome {
    if (outcome.kind === 'failed') return { ...outcome, message: this.guard.text('receipt', 'message', outcome.message) };
    if (outcome.kind === 'executed') return { ...outcome, artifactHashes: this.guard.receipt('run.executed', { artifact_hashes: outcome.artifactHashes }).artifact_hashes };
    return outcome;
  }

  /**
   * What the guard found (a name, a host, a message — beyond the output scanned at each step) goes
   * on the chain before the run's ending: a `secret.redacted` each and a critical `alert.raised`,
   * and the run ends ROLLBACK E_SECRET_SEEN — unless someone else ended or cancelled it meanwhile,
   * which stands (the findings are still recorded).
   */
  private async settleLeaks(outcome: Outcome): Promise<Outcome> {
    if (!this.guard.seen) return outcome;
    const described: string[] = [];
    for (let round = 0; round < 4; round++) {
      const fresh = this.guard.takeUnrecorded();
      if (fresh.length === 0) break;
      for (const leak of fresh.slice(0, 64)) {
        await this.appendOwn('record', 'secret.redacted', leakRedactedFields(leak, this.runningStep), `leak-${this.leaksRecorded}`);
        this.leaksRecorded += 1;
      }
      described.push(describeLeaks(fresh));
      await this.appendOwn('record', 'alert.raised', { severity: 'critical', error_code: 'E_SECRET_SEEN', message: `E_SECRET_SEEN: ${described.at(-1)}; redacted before it was recorded, and the run is stopped` }, `alert-leak-${round}-${this.leaksRecorded}`);
      this.deps.logger.write('fatal', 'secret seen in what the run would record: redacted, run stopped', { run_id: this.runId, error_code: 'E_SECRET_SEEN', findings: fresh.length });
    }
    if (outcome.kind === 'stopped' && outcome.cause.kind !== 'secret_seen') return outcome;
    if (outcome.kind === 'failed' && outcome.code === 'E_SECRET_SEEN') return outcome;
    return { kind: 'failed', code: 'E_SECRET_SEEN', message: `E_SECRET_SEEN: ${described.join('; ') || 'a secret was seen'}; redacted before it was recorded, and the run is stopped` };
  }

  private async releaseLease(): Promise<void> {
    await this.deps.leases.delete(this.runId, this.deps.scheduled.lease_id).catch((error: unknown) => {
      this.deps.logger.write('warn', 'could not release the lease', { run_id: this.runId, error: describe(error) });
    });
  }
}

/** Why the stored chain does not verify from genesis, or null when it does (`verifyChain`). */
function integrityProblem(stored: readonly unknown[], runId: string): string | null {
  const integrity = verifyChain(stored, { chainId: runId });
  if (integrity.ok) return null;
  return boundMessage(`E_CHAIN_BROKEN: the chain does not verify from genesis: seq ${integrity.firstBadSeq} ${integrity.reason} (${integrity.verified} receipts verified before it): ${integrity.message}`);
}

function boundMessage(text: string): string {
  return text.length <= 2000 ? text : `${text.slice(0, 1999)}…`;
}

/** Why the sandbox went: the run completed or failed as it went, or it was stopped — cancelled when a cancel stopped it. */
function teardownReason(outcome: Outcome, chain: readonly EvidenceReceipt[]): TeardownReason {
  if (outcome.kind === 'executed' && outcome.sandboxEnded !== undefined) return 'failed';
  if (outcome.kind === 'executed') return decideEnding(chain, 'executed').kind === 'cancelled' ? 'cancelled' : 'completed';
  if (outcome.kind === 'stopped' && outcome.cause.kind === 'cancelled') return 'cancelled';
  return 'failed';
}

/** Where the workload ended its own sandbox: during a step, or before the outputs were collected. */
interface SandboxEnded {
  when: string;
  stepIndex?: number;
}

/** What a failed create means on the record. */
function createFailureCode(error: unknown): ErrorCode {
  if (isCairnError(error) && (error.code === 'E_IMAGE_PULL' || error.code === 'E_RUNTIME_ABSENT')) return error.code;
  return 'E_SANDBOX_START';
}

/** A file transfer that hit a cap ends the run with that cap; any other failure is the runtime's. */
function transferFailure(error: unknown, what: string): Extract<Outcome, { kind: 'failed' }> {
  if (isCairnError(error) && (isLimit(error.code) || error.code === 'E_BUDGET' || error.code === 'E_RUNTIME_ABSENT' || error.code === 'E_SECRET_SEEN' || error.code === 'E_CAPACITY')) {
    return { kind: 'failed', code: error.code, message: `${what}: ${error.message}` };
  }
  // Outputs the sandbox made uncollectable (a fifo, a hard link, …): the workload's doing, named precisely.
  if (isCairnError(error) && error.code === 'E_INPUT' && !what.includes('input')) return { kind: 'failed', code: 'E_INPUT', message: `${what}: ${error.message}` };
  return { kind: 'failed', code: what.includes('input') ? 'E_SANDBOX_START' : 'E_INTERNAL', message: `${what}: ${describe(error)}` };
}

export function describe(error: unknown): string {
  if (isCairnError(error)) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
