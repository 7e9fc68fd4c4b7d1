import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';

export function registerBackupCommands(program: Command, context: CommandContext): void {
  program
    .command('backup')
    .argument('<dir>', 'a new or empty directory')
    .description("back up the stack: its database (pg_dump) and a snapshot of each of its streams, with a manifest of sha256 digests")
    .addHelpText(
      'after',
      '\nThe database is dumped first, the streams after, so the log is never behind the database. The stack may be running.\n' +
        'Keys are not in a backup: keep $CAIRN_HOME/secrets.key and seal.key apart (docs/operations.md).\n' +
        'Exit status: 0 written, 1 failed (E_CONFLICT for a directory that is not empty, E_UNAVAILABLE when NATS, PostgreSQL or pg_dump fail).',
    )
    .action(async (dir: string, _options: unknown, command: Command) => {
      const output = context.output(command);
      const { connectForBackup, stackEnv, takeBackup } = await import('../backup.js');
      const { databaseUrl } = await import('../connections.js');
      const { env } = await stackEnv(context.env);
      const nc = await connectForBackup(env);
      try {
        const target = resolve(dir);
        const { manifest, skipped } = await takeBackup(nc, env, databaseUrl(env), target);
        const messages = manifest.streams.reduce((sum, s) => sum + s.messages, 0);
        output.result(
          `${output.okMark()}  backup in ${target}: database ${manifest.database.bytes} bytes, ${manifest.streams.length} streams (${messages} messages: ${manifest.streams.map((s) => `${s.stream} ${s.messages}`).join(', ')})` +
            (skipped.length === 0 ? '' : `; not there: ${skipped.join(', ')}`),
          { ok: true, dir: target, manifest, skipped },
        );
      } finally {
        await nc.close();
      }
    });

  program
    .command('restore')
    .argument('<dir>', 'a directory written by `cairn backup`')
    .description('restore a backup into a stopped stack: every file checked against the manifest, the streams and the database restored, the projections rebuilt from the log')
    .option('--replace', 'delete streams of the same names first (they are otherwise refused)')
    .option('--no-rebuild', 'keep the projections as dumped instead of rebuilding them from the restored log')
    .addHelpText('after', '\nExit status: 0 restored, 1 failed (E_INPUT for a damaged backup, E_CONFLICT while the stack runs or a stream exists).')
    .action(async (dir: string, options: { replace?: boolean; rebuild: boolean }, command: Command) => {
      const output = context.output(command);
      const { assertStopped, connectForBackup, readBackup, rebuildAfterRestore, restoreBackup, stackEnv } = await import('../backup.js');
      const { env, running } = await stackEnv(context.env);
      assertStopped(running);
      const target = resolve(dir);
      const manifest = await readBackup(target);
      const { databaseUrl } = await import('../connections.js');
      const url = databaseUrl(env);
      const nc = await connectForBackup(env);
      let restored;
      try {
        output.note(`restoring ${manifest.streams.length} streams and the database from ${target} (taken ${manifest.createdAt})…`);
        restored = await restoreBackup(nc, target, manifest, url, options.replace === true);
      } finally {
        await nc.close();
      }
      let rebuilt: { events: number; runs: number } | null = null;
      if (options.rebuild) {
        output.note('rebuilding the projections from the restored log…');
        rebuilt = await rebuildAfterRestore(env, url);
      }
      output.result(
        `${output.okMark()}  restored ${restored.streams.map((s) => `${s.stream} (${s.messages})`).join(', ')} and the database` +
          (rebuilt === null ? '' : `; projections rebuilt: ${rebuilt.events} events, ${rebuilt.runs} runs`),
        { ok: true, dir: target, streams: restored.streams, rebuilt },
      );
    });
}
