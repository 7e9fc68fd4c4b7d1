import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';

export function registerLogCommand(program: Command, context: CommandContext): void {
  const log = program.command('log').description('manage the evidence stream itself');
  log
    .command('migrate')
    .description('copy a log of the earlier subject layout (<prefix>.<chain id>) into the current one (<prefix>.<chain id>.<type>), verifying every chain')
    .addHelpText(
      'after',
      '\nStop the services first (cairn down). Every chain is verified before anything changes; the stream is then\n' +
        'kept as <stream>_LAYOUT1 (delete it yourself once satisfied), made again in the current layout and filled in\n' +
        'order, each chain verified again as it is copied, and the durable consumers made again at their positions.\n' +
        'A migration that stopped is finished by running it again. Reads CAIRN_NATS_URL, CAIRN_EVIDENCE_STREAM,\n' +
        'CAIRN_EVIDENCE_SUBJECT_PREFIX (unset ones come from the stack `cairn up` started).\n' +
        'Exit status: 0 migrated or already current, 1 failed (E_CHAIN_BROKEN: a chain does not verify; nothing changed).',
    )
    .action(async (_options: unknown, command: Command) => {
      const output = context.output(command);
      // Loaded on use, as every command that talks to NATS.
      const { runLogMigration } = await import('../log-migration.runner.js');
      const { withStackDefaults } = await import('../stack/stack-target.js');
      const env = await withStackDefaults(context.env);
      const result = await runLogMigration(env, (line) => output.note(line));
      const human =
        result.outcome === 'current'
          ? `${output.okMark()}  ${result.stream} already holds the current subject layout: nothing to migrate`
          : `${output.okMark()}  migrated ${result.stream}: ${result.receipts} receipts on ${result.chains} chains, every chain verified; the earlier layout is kept in ${String(result.backup)}`;
      output.result(human, { ok: true, ...result });
    });
}
