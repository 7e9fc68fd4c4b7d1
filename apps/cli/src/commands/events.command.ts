import { ChainIdSchema } from '@cairn/contracts';
import { jsonLine } from '@cairn/evidence';
import type { Command } from 'commander';
import { z } from 'zod';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import { chainPath } from '../gateway-client.js';
import type { Receipt } from '../gateway-client.js';
import { formatEventLine } from '../run-report.js';
import { resolveTarget } from '../stack/stack-target.js';

/** A run id, a sandbox session's or a tenant's admin chain (each read the same way); anything else before a request. */
function parseEventsChainId(value: string): string {
  const parsed = ChainIdSchema.safeParse(value);
  if (!parsed.success) throw usageError(`invalid run id ${JSON.stringify(value)}: a run id is run_… (a sandbox's sbx_…, a tenant's admin chain adm_…) in [a-z0-9_-]`, { runId: value });
  return parsed.data;
}

function parseAfter(value: string): number {
  const after = Number(value);
  if (!Number.isInteger(after) || after < 0) throw usageError(`--after takes a seq (a whole number ≥ 0), got ${JSON.stringify(value)}`);
  return after;
}

export function registerEventsCommand(program: Command, context: CommandContext): void {
  program
    .command('events')
    .description("a run's (or a sandbox session's) receipts, one per line; with --follow, live until it is sealed")
    .argument('<run>', 'a run id (run_…), a sandbox id (sbx_…) or a tenant\'s admin chain (adm_<tenant>)')
    .option('-f, --follow', 'keep printing receipts as they are appended, until run.sealed (server-sent events, resumed if dropped)')
    .option('--after <seq>', 'only receipts after this seq', '0')
    .addHelpText(
      'after',
      '\nHuman output: seq, time, type, actor and a short description. With --json: the receipts themselves as JSON Lines\n' +
        '(exactly as stored, one per line: a chain file `cairn verify` reads when it starts at seq 1).\n' +
        'Exit status: 0 ok, 1 unknown run (E_NOT_FOUND) or stack unreachable, 2 bad arguments.',
    )
    .action(async (rawRun: string, options: { follow?: boolean; after: string }, command: Command) => {
      const output = context.output(command);
      const runId = parseEventsChainId(rawRun);
      const after = parseAfter(options.after);
      const { client } = await resolveTarget(context.env);
      const print = (receipt: Receipt) => context.streams.stdout.write(output.json ? jsonLine(receipt) : `${formatEventLine(receipt)}\n`);
      if (options.follow === true) {
        // An admin chain is never sealed: there is nothing to follow to an end.
        if (runId.startsWith('adm_')) throw usageError('--follow reads runs and sandboxes; an admin chain (adm_…) is listed without it');
        for await (const receipt of client.follow(runId, after)) print(receipt);
        return;
      }
      // Fails with E_NOT_FOUND for an unknown run or sandbox, also when it has no events after `after`.
      await client.json(chainPath(runId), z.looseObject({}));
      let cursor: number | null = after;
      while (cursor !== null) {
        const page = await client.events(runId, cursor, 500);
        for (const receipt of page.items) print(receipt);
        cursor = page.items.length === 0 ? null : page.nextAfter;
      }
    });
}
