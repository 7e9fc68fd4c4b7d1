import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { resolveTarget } from '../stack/stack-target.js';
import { parseRunId } from './status.command.js';

export function registerCancelCommand(program: Command, context: CommandContext): void {
  program
    .command('cancel')
    .description('cancel a run: before it runs it ends CANCELLED; while it runs its sandbox is stopped and destroyed')
    .argument('<run>', 'a run id (run_…)')
    .addHelpText('after', '\nExit status: 0 cancel accepted, 1 the run is sealed (E_SEALED) or already ended (E_CONFLICT), unknown (E_NOT_FOUND) or the stack unreachable.')
    .action(async (rawRun: string, _options: unknown, command: Command) => {
      const output = context.output(command);
      const runId = parseRunId(rawRun);
      const { client } = await resolveTarget(context.env);
      const answer = await client.runs.cancel(runId);
      output.result(`${output.okMark()}  cancel accepted  ${answer.runId}  ${answer.state}`, { ok: true, runId: answer.runId, state: answer.state });
    });
}
