import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import type { DownResult } from '../stack/stack-up.js';
import { parseSeconds } from './up.command.js';

export function formatDown(result: DownResult, okMark: string): { human: string; machine: Record<string, unknown> } {
  if (!result.wasRunning) {
    return { human: `${okMark}  no stack to stop in ${result.home}`, machine: { ok: true, home: result.home, stopped: [] } };
  }
  const killed = result.stopped.filter((s) => s.signal === 'SIGKILL').map((s) => s.service);
  const human = `${okMark}  stopped ${result.stopped.length} processes${killed.length === 0 ? '' : ` (${killed.join(', ')} needed SIGKILL)`}`;
  return { human, machine: { ok: true, home: result.home, stopped: result.stopped } };
}

export function registerDownCommand(program: Command, context: CommandContext): void {
  program
    .command('down')
    .description('stop every process of the stack started by `cairn up` (SIGTERM, then SIGKILL after a timeout)')
    .option('--timeout <seconds>', 'how long each process gets to stop after SIGTERM', '15')
    .addHelpText('after', '\nRemoves stack.json; the API key and logs stay in CAIRN_HOME, the artifacts in their NATS object store. NATS, PostgreSQL and Docker keep running.')
    .action(async (options: { timeout: string }, command: Command) => {
      const output = context.output(command);
      const timeoutMs = parseSeconds(options.timeout, '--timeout');
      const { stackDown } = await import('../stack/stack-up.js');
      const { human, machine } = formatDown(await stackDown(context.env, timeoutMs), output.okMark());
      output.result(human, machine);
    });
}
