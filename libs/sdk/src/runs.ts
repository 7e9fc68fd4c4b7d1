import {
  API_COMPONENTS,
  ApprovalRequestSchema,
  CairnError,
  CancelRequestSchema,
  HarborTaskSubmissionSchema,
  RegradeRequestSchema,
  IdempotencyKeySchema,
  inputIssues,
  ListRunsQuerySchema,
  parseRunSpec,
  RunIdSchema,
} from '@cairn/contracts';
import type {
  ApprovalAccepted,
  ApprovalRequest,
  CancelAccepted,
  HarborSubmitAccepted,
  HarborTaskSubmission,
  RegradeAccepted,
  EventPage,
  ListRunsQuery,
  OutputStream,
  ProofBundle,
  Receipt,
  Run,
  RunArtifacts,
  RunList,
  StepOutputs,
  SubmitAccepted,
} from '@cairn/contracts';
import type { z } from 'zod';
import type { Chains, EventsOptions, FollowOptions } from './chains.js';
import { openBytes, readBytes } from './outputs.js';
import type { Bytes, OpenedBytes, ReadOptions } from './outputs.js';
import { route } from './transport.js';
import type { Transport } from './transport.js';

/** How long `submitHarborTask` waits by default: a worker builds the task's environment first (its limit is 10 minutes by default). */
export const HARBOR_SUBMIT_TIMEOUT_MS = 15 * 60_000;

/** A fresh Idempotency-Key: getRandomValues works outside secure contexts too, unlike randomUUID. */
export function freshIdempotencyKey(prefix = 'sdk'): string {
  return `${prefix}-${Array.from(globalThis.crypto.getRandomValues(new Uint8Array(16)), (byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}

/** E_INPUT naming each field, before anything is sent. */
export function checked<S extends z.ZodType>(schema: S, value: unknown, what: string): z.infer<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issues = inputIssues(result.error);
  throw new CairnError('E_INPUT', `invalid ${what}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
}

function runId(id: string): string {
  const parsed = RunIdSchema.safeParse(id);
  if (!parsed.success) throw new CairnError('E_INPUT', `invalid run id ${JSON.stringify(id.slice(0, 100))}: a run id is run_… in [a-z0-9_-]`, { runId: id.slice(0, 100) });
  return parsed.data;
}

export interface WaitOptions {
  signal?: AbortSignal;
  /** Stop waiting after this long (E_UNAVAILABLE; the run goes on). */
  timeoutMs?: number;
  /** Each receipt as it is appended. */
  onReceipt?: (receipt: Receipt) => void | Promise<void>;
}

/** Every output of a run, read and checked: each step's streams and each collected file. */
export interface RunOutputs {
  runId: string;
  steps: (Pick<StepOutputs, 'index' | 'name' | 'exitCode'> & { stdout: Bytes; stderr: Bytes })[];
  files: (Bytes & { path: string })[];
}

/** Runs: submit a RunSpec, follow it to its seal, read what it printed and wrote, export its proof. */
export class Runs {
  constructor(
    private readonly http: Transport,
    private readonly chains: Chains,
  ) {}

  /**
   * Submits a RunSpec (checked against the contracts first: E_INPUT names the field and nothing
   * is sent). The same Idempotency-Key with the same spec answers the same run (`duplicate`).
   */
  async submit(spec: unknown, options: { idempotencyKey?: string; signal?: AbortSignal } = {}): Promise<SubmitAccepted> {
    parseRunSpec(spec);
    const key = checked(IdempotencyKeySchema, options.idempotencyKey ?? freshIdempotencyKey(), 'Idempotency-Key');
    const { method, path } = route('submitRun');
    return this.http.json(method, path, API_COMPONENTS.SubmitAccepted, { json: spec, headers: { 'idempotency-key': key }, ...signalOf(options.signal) });
  }

  /**
   * Submits a Harbor task directory's files (`POST /v1/missions/harbor`, docs/missions.md): a worker
   * builds its environment (environment/Dockerfile, cached by digest) and the gateway maps the task
   * to a RunSpec as `cairn run <task-dir>` does; the answer names the image built (`imageBuild`). The
   * body is checked against the contracts first (paths, counts, oracle or agent); from disk,
   * `harborTaskSubmission(dir, …)` of `@cairn/sdk` (Node) makes it. A build can take minutes: the
   * call waits up to `timeoutMs` (default 15 minutes).
   */
  async submitHarborTask(submission: HarborTaskSubmission, options: { idempotencyKey?: string; signal?: AbortSignal; timeoutMs?: number } = {}): Promise<HarborSubmitAccepted> {
    const body = checked(HarborTaskSubmissionSchema, submission, 'Harbor task');
    const key = checked(IdempotencyKeySchema, options.idempotencyKey ?? freshIdempotencyKey(), 'Idempotency-Key');
    const { method, path } = route('submitHarborTask');
    return this.http.json(method, path, API_COMPONENTS.HarborSubmitAccepted, {
      json: body,
      headers: { 'idempotency-key': key },
      timeoutMs: options.timeoutMs ?? HARBOR_SUBMIT_TIMEOUT_MS,
      ...signalOf(options.signal),
    });
  }

  async get(id: string, signal?: AbortSignal): Promise<Run> {
    const { method, path } = route('getRun', { id: runId(id) });
    return this.http.json(method, path, API_COMPONENTS.Run, signalOf(signal));
  }

  /** The tenant's runs, newest first, a page at a time (`cursor`: the previous page's nextCursor). */
  async list(query: Partial<ListRunsQuery> = {}, signal?: AbortSignal): Promise<RunList> {
    const q = checked(ListRunsQuerySchema, query, 'run listing');
    const { method, path } = route('listRuns');
    return this.http.json(method, path, API_COMPONENTS.RunList, { query: { ...q }, ...signalOf(signal) });
  }

  async events(id: string, options: EventsOptions = {}): Promise<EventPage> {
    return this.chains.events(runId(id), options);
  }

  /** Every receipt of the run after `after`, as it is appended, until run.sealed; resumed across drops (Last-Event-ID). */
  async *follow(id: string, options: FollowOptions = {}): AsyncGenerator<Receipt> {
    yield* this.chains.follow(runId(id), options);
  }

  /** Follows the run until it is sealed, then answers it as projected. */
  async wait(id: string, options: WaitOptions = {}): Promise<Run> {
    const signals = [options.signal, options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs)].filter((s): s is AbortSignal => s !== undefined);
    const signal = signals.length === 0 ? undefined : AbortSignal.any(signals);
    let sealed = false;
    for await (const receipt of this.follow(id, signal === undefined ? {} : { signal })) {
      await options.onReceipt?.(receipt);
      if (receipt.type === 'run.sealed') sealed = true;
    }
    if (!sealed) {
      if (options.signal?.aborted === true) throw options.signal.reason as Error;
      if (signal?.aborted === true) throw new CairnError('E_UNAVAILABLE', `stopped waiting for ${id} after ${Math.round((options.timeoutMs ?? 0) / 1000)} s; it goes on`, { runId: id });
      throw new CairnError('E_INTERNAL', `the event stream of ${id} ended before run.sealed`, { runId: id });
    }
    return this.get(id);
  }

  async bundle(id: string, signal?: AbortSignal): Promise<ProofBundle> {
    return this.chains.bundle(runId(id), signal);
  }

  async cancel(id: string, reason?: string): Promise<CancelAccepted> {
    const body = reason === undefined ? undefined : checked(CancelRequestSchema, { reason }, 'cancel request');
    const { method, path } = route('cancelRun', { id: runId(id) });
    return this.http.json(method, path, API_COMPONENTS.CancelAccepted, body === undefined ? {} : { json: body });
  }

  /** Grades again a verified run whose grading failed (a judge's failure): the steps are not run again (docs/adr/0030). */
  async regrade(id: string, reason?: string): Promise<RegradeAccepted> {
    const body = reason === undefined ? undefined : checked(RegradeRequestSchema, { reason }, 'regrade request');
    const { method, path } = route('regradeRun', { id: runId(id) });
    return this.http.json(method, path, API_COMPONENTS.RegradeAccepted, body === undefined ? {} : { json: body });
  }

  /** Approves or rejects what a held run awaits (every pending approval, or `approvalId`). */
  async decide(id: string, decision: ApprovalRequest): Promise<ApprovalAccepted> {
    const body = checked(ApprovalRequestSchema, decision, 'approval');
    const { method, path } = route('decideApproval', { id: runId(id) });
    return this.http.json(method, path, API_COMPONENTS.ApprovalAccepted, { json: body });
  }

  /** What the run printed and wrote, as its chain records it: steps' streams and collected files (hashes and sizes). */
  async artifacts(id: string, signal?: AbortSignal): Promise<RunArtifacts> {
    const { path } = route('getRunArtifacts', { id: runId(id) });
    return this.http.json('GET', path, API_COMPONENTS.RunArtifacts, signalOf(signal));
  }

  /**
   * A step's stdout or stderr, exactly as kept, checked against its sha256: of the current attempt,
   * or of `attempt` (1 the first) of a run retried after a lost worker (ADR 0035).
   */
  async output(id: string, step: number, stream: OutputStream, options: ReadOptions & { attempt?: number } = {}): Promise<Bytes> {
    const { attempt, ...read } = options;
    if (attempt !== undefined && !(Number.isSafeInteger(attempt) && attempt >= 1)) throw new CairnError('E_INPUT', `attempt must be a whole number from 1, not ${attempt}`);
    const path = route('getStepOutput', { id: runId(id), index: step, stream }).path;
    return readBytes(this.http, attempt === undefined ? path : `${path}?attempt=${attempt}`, read);
  }

  async stdout(id: string, step: number, options: ReadOptions = {}): Promise<Bytes> {
    return this.output(id, step, 'stdout', options);
  }

  async stderr(id: string, step: number, options: ReadOptions = {}): Promise<Bytes> {
    return this.output(id, step, 'stderr', options);
  }

  /** A collected file (`/out/report.json`), checked against its sha256. */
  async artifact(id: string, filePath: string, options: ReadOptions = {}): Promise<Bytes> {
    return readBytes(this.http, route('getRunArtifact', { id: runId(id), path: filePath }).path, options);
  }

  /** A collected file as a stream, for files too large to hold: the caller checks it hashes to `sha256`. */
  async openArtifact(id: string, filePath: string, signal?: AbortSignal): Promise<OpenedBytes> {
    return openBytes(this.http, route('getRunArtifact', { id: runId(id), path: filePath }).path, signalOf(signal));
  }

  /** Every output of the run read and checked: each step's stdout and stderr, each collected file (each at most `maxBytes`). */
  async outputs(id: string, options: Omit<ReadOptions, 'expectedSha256'> = {}): Promise<RunOutputs> {
    const listed = await this.artifacts(id, options.signal);
    const steps: RunOutputs['steps'] = [];
    for (const step of listed.steps) {
      steps.push({
        index: step.index,
        name: step.name,
        exitCode: step.exitCode,
        stdout: await this.stdout(id, step.index, { ...options, expectedSha256: step.stdout.sha256 }),
        stderr: await this.stderr(id, step.index, { ...options, expectedSha256: step.stderr.sha256 }),
      });
    }
    const files: RunOutputs['files'] = [];
    for (const file of listed.items) files.push({ path: file.path, ...(await this.artifact(id, file.path, { ...options, expectedSha256: file.sha256 })) });
    return { runId: listed.runId, steps, files };
  }
}

export function signalOf(signal: AbortSignal | undefined): { signal?: AbortSignal } {
  return signal === undefined ? {} : { signal };
}
