import { RunIdSchema, RUN_STATES, RunStateSchema } from '@cairn/contracts';
import type { RunState } from '@cairn/contracts';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import { formatRunDetails, formatRunTable } from '../run-report.js';
import { resolveTarget } from '../stack/stack-target.js';

/** Refuses anything that is not a run id before a request is made. */
export function parseRunId(value: string): string {
  const parsed = RunIdSchema.safeParse(value);
  if (!parsed.success) throw usageError(`invalid run id ${JSON.stringify(value)}: a run id is run_… in [a-z0-9_-]`, { runId: value });
  return parsed.data;
}

export function parseLimit(value: string): number {
  const limit = Number(value);
  if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw usageError(`--limit takes a whole number from 1 to 200, got ${JSON.stringify(value)}`);
  return limit;
}

export function parseState(value: string): RunState {
  const state = RunStateSchema.safeParse(value.toUpperCase());
  if (!state.success) throw usageError(`--state takes one of ${RUN_STATES.join(', ')}`);
  return state.data;
}

export function registerStatusCommand(program: Command, context: CommandContext): void {
  program
    .command('status')
    .description("one run's state, verdict and score; without a run, a table of the most recent runs")
    .argument('[run]', 'a run id (run_…)')
    .option('--limit <n>', 'how many recent runs to list', '20')
    .option('--state <state>', 'list only runs in this state (e.g. SEALED, ROLLBACK)')
    .addHelpText('after', '\nReads the gateway of the stack in CAIRN_HOME (or CAIRN_URL + CAIRN_API_KEY).\nExit status: 0 ok, 1 unknown run (E_NOT_FOUND) or stack unreachable, 2 bad arguments.')
    .action(async (rawRun: string | undefined, options: { limit: string; state?: string }, command: Command) => {
      const output = context.output(command);
      const runId = rawRun === undefined ? undefined : parseRunId(rawRun);
      const limit = parseLimit(options.limit);
      const state = options.state === undefined ? undefined : parseState(options.state);
      const { client } = await resolveTarget(context.env);
      if (runId !== undefined) {
        const run = await client.runs.get(runId);
        output.result(formatRunDetails(run), { ok: true, ...run });
        return;
      }
      const page = await client.runs.list({ limit, ...(state === undefined ? {} : { state }) });
      output.result(formatRunTable(page.items), { ok: true, items: page.items, nextCursor: page.nextCursor });
    });
}
