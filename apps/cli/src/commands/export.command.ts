import { CairnError, ChainIdSchema } from '@cairn/contracts';
import { ChainVerifier } from '@cairn/evidence';
import type { Command } from 'commander';
import { atomicFileSink, stdoutSink } from '../chain-file.writer.js';
import type { ChainFileSink } from '../chain-file.writer.js';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import { chainBrokenError } from './verify.command.js';

interface ExportOptions {
  output?: string;
}

/** Refuses a chain id that is not `run_…`/`sbx_…`/`adm_…` in `[a-z0-9_-]` before anything connects. */
export function parseChainId(value: string): string {
  const parsed = ChainIdSchema.safeParse(value);
  if (!parsed.success) throw usageError(`invalid chain id ${JSON.stringify(value)}: a chain id is run_…, sbx_… or adm_… in [a-z0-9_-]`, { chainId: value });
  return parsed.data;
}

export function registerExportCommand(program: Command, context: CommandContext): void {
  program
    .command('export')
    .description('write a chain from the evidence log as a chain file (JSON Lines, one receipt per line) for `cairn verify`')
    .argument('<chain-id>', 'the chain to export: a run id (run_…), a sandbox id (sbx_…) or a tenant\'s admin chain (adm_<tenant>)')
    .option('-o, --output <file>', 'write to this file (atomically: a temp file renamed into place) instead of stdout')
    .addHelpText(
      'after',
      '\nReads from NATS JetStream (CAIRN_NATS_URL, CAIRN_EVIDENCE_STREAM, CAIRN_EVIDENCE_SUBJECT_PREFIX; unset ones come from\n' +
        'the stack started by `cairn up` in CAIRN_HOME, if any).\n' +
        'Exit status: 0 exported, 1 unknown chain (E_NOT_FOUND), chain broken in the log or NATS unreachable, 2 bad chain id.',
    )
    .action(async (rawChainId: string, options: ExportOptions, command: Command) => {
      const output = context.output(command);
      const chainId = parseChainId(rawChainId);
      // Loaded on use: the NATS client is not needed offline.
      const { openEvidenceLog } = await import('../connections.js');
      const { withStackDefaults } = await import('../stack/stack-target.js');
      const evidence = await openEvidenceLog(await withStackDefaults(context.env), { mustExist: true });
      let sink: ChainFileSink | undefined;
      try {
        sink = options.output === undefined ? stdoutSink(context.streams.stdout) : await atomicFileSink(options.output);
        const progress = output.progress();
        // The export is checked as it streams, so a broken chain in the log never exports silently.
        const verifier = new ChainVerifier({ chainId, requireNonEmpty: true });
        let count = 0;
        for await (const { receipt } of evidence.log.readChain(chainId)) {
          await sink.writeReceipt(receipt);
          verifier.push(receipt);
          count += 1;
          progress.update(`exported ${count} receipts of ${chainId}…`);
        }
        progress.done();
        if (count === 0) throw new CairnError('E_NOT_FOUND', `no chain ${chainId} in the evidence log`, { chainId });
        await sink.commit();
        sink = undefined;

        const verification = verifier.result();
        const where = options.output ?? 'stdout';
        if (!verification.ok) {
          const broken = chainBrokenError(verification);
          throw new CairnError('E_CHAIN_BROKEN', `exported ${count} receipts to ${where}, but ${broken.message}`, broken.details);
        }
        const summary = `exported ${count} receipts  chain ${chainId}  head ${verification.headHash}`;
        if (options.output === undefined) {
          // stdout carries the chain itself; the summary is a note for people.
          output.note(summary);
        } else {
          output.result(`${output.okMark()}  ${summary}  to ${options.output}`, {
            ok: true,
            chainId,
            count,
            headHash: verification.headHash,
            file: options.output,
          });
        }
      } finally {
        await sink?.abort();
        await evidence.close();
      }
    });
}
