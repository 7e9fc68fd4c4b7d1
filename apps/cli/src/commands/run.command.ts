import { inSpan } from '@cairn/tracing';
import { randomUUID } from 'node:crypto';
import { stat } from 'node:fs/promises';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { EXIT_FAILED, usageError } from '../exit-codes.js';
import type { Output } from '../output.js';
import { formatOutcome, isUnsuccessful, outcomeOf } from '../run-report.js';
import type { RunOutcome } from '../run-report.js';
import { readRunSpec } from '../run-spec.reader.js';
import { resolveTarget } from '../stack/stack-target.js';
import { harborTaskDirs, runHarbor } from './harbor-run.js';
import { followRun, parseIdempotencyKey, StepEcho } from './follow-run.js';
import { parseSeconds } from './up.command.js';

interface RunOptions {
  oracle?: boolean;
  agent?: string;
  wait?: boolean;
  quiet?: boolean;
  idempotencyKey?: string;
  timeout?: string;
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
