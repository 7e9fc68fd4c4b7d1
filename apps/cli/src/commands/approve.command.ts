import { ApprovalIdSchema, unstorableText } from '@cairn/contracts';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import { resolveTarget } from '../stack/stack-target.js';
import { parseRunId } from './status.command.js';

interface ApproveOptions {
  reject?: boolean;
  comment?: string;
  approval?: string;
}

/** The request body, checked before anything is sent. */
export function approvalBody(options: ApproveOptions): { decision: 'approve' | 'reject'; comment?: string; approvalId?: string } {
  const body: { decision: 'approve' | 'reject'; comment?: string; approvalId?: string } = { decision: options.reject === true ? 'reject' : 'approve' };
  if (options.comment !== undefined) {
    if (options.comment.length === 0 || options.comment.length > 1024 || unstorableText(options.comment) !== null) {
      throw usageError('--comment takes 1 to 1024 characters without NUL');
    }
    body.comment = options.comment;
  }
  if (options.approval !== undefined) {
    if (!ApprovalIdSchema.safeParse(options.approval).success) throw usageError(`--approval takes an approval id such as image, egress or step-2, got ${JSON.stringify(options.approval)}`);
    body.approvalId = options.approval;
  }
  return body;
}

export function registerApproveCommand(program: Command, context: CommandContext): void {
  program
    .command('approve')
    .description('approve (or --reject) what a held run awaits; the approver is recorded on the run\'s chain')
    .argument('<run>', 'a run id (run_…)')
    .option('--reject', 'reject instead: the run ends CANCELLED with E_NO_APPROVAL')
    .option('--comment <text>', 'a note recorded with the decision (at most 1024 characters)')
    .option('--approval <id>', 'decide one approval (image, egress, step-<n>) instead of every pending one')
    .addHelpText(
      'after',
      '\nNeeds a key with the approve scope (CAIRN_API_KEY), other than the key that submitted the run.\n' +
        'Exit status: 0 decision recorded, 1 forbidden (E_FORBIDDEN: your own run, or no approve scope), nothing awaits approval (E_CONFLICT),\n' +
        'the run is sealed (E_SEALED), unknown (E_NOT_FOUND) or the stack unreachable, 2 bad arguments.',
    )
    .action(async (rawRun: string, options: ApproveOptions, command: Command) => {
      const output = context.output(command);
      const runId = parseRunId(rawRun);
      const body = approvalBody(options);
      const { client } = await resolveTarget(context.env);
      const answer = await client.runs.decide(runId, body);
      const what = answer.decision === 'reject' ? 'rejected' : 'approved';
      const again = answer.duplicate ? '  (decided so before)' : '';
      output.result(`${output.okMark()}  ${what}  ${answer.runId}  ${answer.state}${again}`, { ok: true, ...answer });
    });
}
