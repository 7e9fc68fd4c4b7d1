import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { resolveTarget } from '../stack/stack-target.js';
import { parseRunId } from './status.command.js';

/** `cairn regrade <run>`: a verified run whose grading failed (a judge's failure) is graded again, not run again (docs/adr/0030). */
export function registerRegradeCommand(program: Command, context: CommandContext): void {
  program
    .command('regrade')
    .description('grade again a run whose grading failed (a judge that timed out, failed or was not configured); its steps are not run again')
    .argument('<run>', 'a run id (run_…)')
    .option('--reason <text>', 'why, recorded on the chain (grade.requested)')
    .addHelpText(
      'after',
      '\nThe grader asks the judge anew, records grade.recorded (or grade.failed again) and seals the run.' +
        '\nExit status: 0 accepted, 1 the run is sealed (E_SEALED), graded, still grading or ended otherwise (E_CONFLICT), unknown (E_NOT_FOUND) or the stack unreachable.',
    )
    .action(async (rawRun: string, options: { reason?: string }, command: Command) => {
      const output = context.output(command);
      const runId = parseRunId(rawRun);
      const { client } = await resolveTarget(context.env);
      const answer = await client.runs.regrade(runId, options.reason);
      const note = answer.duplicate ? 'asked already' : 'regrade accepted';
      output.result(`${output.okMark()}  ${note}  ${answer.runId}`, { ok: true, runId: answer.runId, duplicate: answer.duplicate });
    });
}
