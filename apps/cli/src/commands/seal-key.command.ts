import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { parseSeconds } from './up.command.js';

/*
 * `cairn seal-key rotate`: a new seal signing key for the stack (docs/proofs.md, "Keys"). The new
 * verifier key is published first and the old one kept as retired, so every seal and checkpoint it
 * signed still verifies; then the grader (which signs) and the gateway (which publishes the keys
 * at /.well-known/cairn/keys) are restarted on the new files when the stack runs.
 */

export function registerSealKeyCommand(program: Command, context: CommandContext): void {
  const sealKey = program.command('seal-key').description("the stack's seal signing key (docs/proofs.md)");
  sealKey
    .command('rotate')
    .description('make a new seal signing key; the old one stays published as retired, so old seals still verify')
    .option('--timeout <seconds>', 'how long to wait for the restarted grader and gateway to be healthy', '90')
    .addHelpText(
      'after',
      '\nThe key files are the stack\'s (CAIRN_SEAL_KEY_FILE, CAIRN_SEAL_PUBLIC_KEYS_FILE; default seal.key and seal-keys.pub in\n' +
        'CAIRN_HOME). A running stack has its grader and gateway restarted on them; a stopped one takes them at `cairn up`.\n' +
        'Prints the verifier keys (public), never the private key. Pin the new key wherever seals are checked (`cairn verify --key`).',
    )
    .action(async (options: { timeout: string }, command: Command) => {
      const output = context.output(command);
      const timeoutMs = parseSeconds(options.timeout, '--timeout');
      const { rotateStackSealKey } = await import('../stack/seal-key-rotation.js');
      const rotated = await rotateStackSealKey(context.env, { setup: false, timeoutMs, progress: (message) => output.note(`[seal-key] ${message}`), stderr: context.streams.stderr });
      const human = [
        `${output.okMark()}  seal key rotated`,
        `   current  ${rotated.current}`,
        `   retired  ${rotated.retired} (still published: its seals verify)`,
        rotated.restarted.length > 0 ? `   restarted ${rotated.restarted.join(', ')}` : '   the stack is not running: `cairn up` takes the new key',
      ].join('\n');
      output.result(human, { ok: true, ...rotated });
    });
}
