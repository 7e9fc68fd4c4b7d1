import type { Command } from 'commander';
import { resolve } from 'node:path';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';

export function registerInitKeysCommand(program: Command, context: CommandContext): void {
  program
    .command('init-keys')
    .description('make the key files of a stack `cairn up` does not start (docker-compose.yml, deploy/k8s): one directory per reader')
    .argument('<dir>', 'where: <dir>/gateway (api-key, seal-keys.pub), grader (seal.key), store (secrets.key), db (password, pgpass)')
    .option('--seal-name <name>', "the seal key's name in signed notes", 'cairn/compose')
    .addHelpText(
      'after',
      '\nEvery directory 0700 and every file 0600 (seal-keys.pub 0644), owned by the user this runs as — the user the\n' +
        "services run as (the compose stack's `keys` service runs it as uid 10001). What exists is kept, so running it again\n" +
        'changes nothing. Prints which files it made, never their content. docs/operations.md.',
    )
    .action(async (dir: string, options: { sealName: string }, command: Command) => {
      const output = context.output(command);
      if (!/^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$/.test(options.sealName)) throw usageError('--seal-name: letters, digits and . _ / -, at most 100');
      const { ensureStackKeys } = await import('../stack/stack-keys.js');
      const result = await ensureStackKeys(resolve(dir), options.sealName);
      const human = `${output.okMark()}  key files in ${result.dir}: ${result.created.length === 0 ? 'all there' : `made ${result.created.join(', ')}`}\n   seal key ${result.verifierKey}`;
      output.result(human, { ok: true, ...result });
    });
}
