import { inSpan } from '@cairn/tracing';
import { randomUUID } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { CairnError, isCairnError } from '@cairn/contracts';
import type { OutputStream, Receipt } from '@cairn/contracts';
import { ChainVerifier } from '@cairn/evidence';
import type { RunView } from '@cairn/lifecycle';
import type { Cairn } from '@cairn/sdk';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { EXIT_FAILED, usageError } from '../exit-codes.js';
import type { CliStreams, Output } from '../output.js';
import { foldReceipt, formatOutcome, isUnsuccessful, outcomeOf, receiptProgressLine } from '../run-report.js';
import type { RunOutcome } from '../run-report.js';
import { readRunSpec } from '../run-spec.reader.js';
import { resolveTarget } from '../stack/stack-target.js';
import { harborTaskDirs, runHarbor } from './harbor-run.js';
import { chainBrokenError } from './verify.command.js';
import { parseSeconds } from './up.command.js';

interface RunOptions {
  oracle?: boolean;
  agent?: string;
  wait?: boolean;
  quiet?: boolean;
  idempotencyKey?: string;
  timeout?: string;
}

/** A step's stream shown by `run --wait` is read whole first (and checked); a larger one is left to `cairn logs`. */
export const ECHO_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Shows each step's output as `docker run` would — its stdout on stdout, its stderr on stderr —
 * once its `step.completed` is on the chain: the bytes the artifact store holds, read back through
 * the gateway and checked against the sha256 that receipt records. An output that cannot be shown
 * is said on stderr; one whose bytes do not match is remembered (the command then exits 1).
 */
export class StepEcho {
  mismatched = false;

  constructor(
    private readonly client: Cairn,
    private readonly streams: CliStreams,
    private readonly output: Output,
  ) {}

  async step(runId: string, receipt: Receipt): Promise<void> {
    const index = receipt.step_index;
    if (typeof index !== 'number') return;
    for (const stream of ['stdout', 'stderr'] as const satisfies readonly OutputStream[]) {
      const expected = receipt[`${stream}_sha256`];
      try {
        const read = await this.client.runs.output(runId, index, stream, { maxBytes: ECHO_MAX_BYTES, ...(typeof expected === 'string' ? { expectedSha256: expected } : {}) });
        if (read.bytes.byteLength > 0) await writeAll(stream === 'stdout' ? this.streams.stdout : this.streams.stderr, read.bytes);
      } catch (error) {
        if (!isCairnError(error)) throw error;
        if (error.code === 'E_INTERNAL') this.mismatched = true;
        this.output.note(`  (step ${index}'s ${stream} is not shown: ${error.code}: ${error.message})`);
      }
    }
  }
}

function writeAll(stream: NodeJS.WritableStream, bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => stream.write(bytes, (error) => (error == null ? resolve() : reject(error))));
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

export function parseIdempotencyKey(value: string): string {
  if (!IDEMPOTENCY_KEY.test(value)) throw usageError('--idempotency-key takes 1 to 200 printable ASCII characters without spaces');
  return value;
}

export interface FollowedRun {
  view: RunView;
  headHash: string;
  count: number;
}

/**
 * Follows a run's receipts over SSE until `run.sealed`, showing progress, folding its state as
 * the projector does, and verifying the chain from genesis as it arrives.
 */
export async function followRun(client: Cairn, runId: string, output: Output, timeoutMs: number | null, echo: StepEcho | null = null): Promise<FollowedRun> {
  const verifier = new ChainVerifier({ chainId: runId, requireNonEmpty: true });
  let view: RunView | null = null;
  const signal = timeoutMs === null ? undefined : AbortSignal.timeout(timeoutMs);
  for await (const receipt of client.runs.follow(runId, signal === undefined ? {} : { signal })) {
    verifier.push(receipt);
    const before = view?.state;
    view = foldReceipt(view, receipt);
    if (echo !== null && receipt.type === 'step.completed') await echo.step(runId, receipt);
    const line = receiptProgressLine(receipt);
    if (line !== null) output.note(`  ${line}`);
    if (before !== undefined && view.state !== before && receipt.type !== 'run.sealed') output.note(`  state       ${view.state}`);
    // A failed grade is not final: the run waits, unsealed, for `cairn regrade` (docs/adr/0030).
    if (receipt.type === 'grade.failed') {
      const cause = typeof receipt.cause === 'string' ? ` (${receipt.cause})` : '';
      throw new CairnError('E_UNAVAILABLE', `the grade of ${runId} failed${cause}; it waits unsealed: once the judge is fixed, npx --no-install cairn regrade ${runId}`, { runId, cause: receipt.cause ?? null });
    }
  }
  if (view === null || !view.sealed) {
    if (signal?.aborted === true) {
      throw new CairnError('E_UNAVAILABLE', `stopped waiting for ${runId} after ${Math.round((timeoutMs ?? 0) / 1000)} s; it goes on: npx --no-install cairn status ${runId}`, { runId });
    }
    throw new CairnError('E_INTERNAL', `the event stream of ${runId} ended before run.sealed`, { runId });
  }
  const verification = verifier.result();
  if (!verification.ok) throw chainBrokenError(verification);
  return { view, headHash: verification.headHash, count: verification.count };
}

function report(output: Output, outcome: RunOutcome, human: string): void {
  output.result(human, { ...outcome });
}

export function registerRunCommand(program: Command, context: CommandContext): void {
  program
    .command('run')
    .description('submit a RunSpec (YAML or JSON) to the stack; with --wait, follow it to its seal')
    .argument('<spec>', 'the RunSpec file (.yaml, .yml or .json), a Harbor task directory (task.toml) or a directory of them')
    .option('--oracle', "a Harbor task: run its solution/solve.sh as the agent")
    .option('--agent <argv-json>', 'a Harbor task: the agent step, a JSON argv (\'["python3", "/work/agent.py"]\'); the instruction is at $HARBOR_INSTRUCTION_FILE')
    .option('-w, --wait', "follow the run until it is sealed, showing each step's stdout and stderr as it completes (progress on stderr), then print its summary")
    .option('-q, --quiet', "with --wait: do not show the steps' output (`cairn logs` shows it later)")
    .option('--idempotency-key <key>', 'the submission key (default: a random one); the same key and spec give the same run')
    .option('--timeout <seconds>', 'with --wait: stop waiting after this long (the run goes on)')
    .addHelpText(
      'after',
      '\nThe spec is checked against the contracts before it is sent (E_INPUT names the field).\n' +
        "Output: the run id and state; with --wait each step's stdout (on stdout) and stderr (on stderr), as docker run shows them,\n" +
        'read back once the step completed and checked against the sha256 its receipt records, then the summary (state, verdict,\n' +
        'score, error code). --json prints exactly one object { runId, state, verdict, score, maxScore, errorCode } (and no output).\n' +
        'Exit status: 0 submitted (or, with --wait, SEALED — even with a low score), 1 the run ended FAILED, ROLLBACK,\n' +
        "REJECTED or CANCELLED (or the stack is unreachable, or a step's output did not hash to its receipt's sha256),\n" +
        '2 a bad spec or option (E_INPUT).',
    )
    .action(async (specPath: string, options: RunOptions, command: Command) => {
      const output = context.output(command);
      const key = options.idempotencyKey === undefined ? randomUUID() : parseIdempotencyKey(options.idempotencyKey);
      const timeoutMs = options.timeout === undefined ? null : parseSeconds(options.timeout, '--timeout');
      const harbor = (await stat(specPath).catch(() => null))?.isDirectory() === true ? await harborTaskDirs(specPath) : null;
      if (harbor !== null) {
        await runHarbor(context, output, specPath, harbor, { ...options, timeout: timeoutMs });
        return;
      }
      if (options.oracle === true || options.agent !== undefined) throw usageError('--oracle and --agent go with a Harbor task directory');
      const spec = await readRunSpec(specPath);
      const { client } = await resolveTarget(context.env);
      // The run's trace starts here when tracing is on (ADR 0031): every request below is its child.
      await inSpan('cairn run', { kind: 'client', attributes: { 'cairn.run.wait': options.wait === true } }, async (span) => {
      const submitted = await client.runs.submit(spec, { idempotencyKey: key });
      span?.setAttribute('cairn.chain_id', submitted.runId);
      if (options.wait !== true) {
        const outcome: RunOutcome = { runId: submitted.runId, state: submitted.state, verdict: null, score: null, maxScore: null, errorCode: null };
        if (submitted.duplicate) output.note(`(the same idempotency key submitted this run before)`);
        report(output, outcome, `${submitted.runId}  ${submitted.state}`);
        output.note(`follow it: npx --no-install cairn events ${submitted.runId} --follow`);
        return;
      }
      output.note(`${submitted.runId}${submitted.duplicate ? '  (submitted before with this idempotency key)' : ''}`);
      const echo = output.json || options.quiet === true ? null : new StepEcho(client, context.streams, output);
      const followed = await followRun(client, submitted.runId, output, timeoutMs, echo);
      const outcome = outcomeOf(followed.view);
      output.note(`  chain       ${followed.count} receipts verified, head ${followed.headHash}`);
      report(output, outcome, formatOutcome({ ...outcome, upperBound: followed.view.upperBound }));
      if (isUnsuccessful(outcome.state) || echo?.mismatched === true) context.exitCode = EXIT_FAILED;
      });
    });
}
