import { CairnError } from '@cairn/contracts';
import type { ChainVerification } from '@cairn/evidence';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import type { Output } from '../output.js';
import { verifyFile } from '../verify-file.js';
import type { EvidenceFileFormat } from '../verify-file.js';

type Verified = Extract<ChainVerification, { ok: true }>;
type Broken = Extract<ChainVerification, { ok: false }>;

/** `OK  <n> receipts  chain <id>  head <hash>` (and the machine shape beside it). */
export function formatVerified(result: Verified, format: EvidenceFileFormat, output: Pick<Output, 'okMark'>): { human: string; machine: Record<string, unknown> } {
  const chain = result.chainId ?? '-';
  const noun = result.count === 1 ? 'receipt' : 'receipts';
  const from = format === 'bundle' ? '  (proof bundle)' : '';
  return {
    human: `${output.okMark()}  ${result.count} ${noun}  chain ${chain}  head ${result.headHash}${from}`,
    machine: { ok: true, chainId: result.chainId, count: result.count, headHash: result.headHash },
  };
}

/** The expected error for a chain that does not verify: the first bad seq and why. */
export function chainBrokenError(result: Broken): CairnError {
  return new CairnError('E_CHAIN_BROKEN', `chain broken at seq ${result.firstBadSeq} (${result.reason}): ${result.message}`, {
    firstBadSeq: result.firstBadSeq,
    reason: result.reason,
  });
}

export function registerVerifyCommand(program: Command, context: CommandContext): void {
  program
    .command('verify')
    .description('verify a chain file (JSON Lines, from `cairn export`) or a proof bundle offline: recompute every hash from genesis')
    .argument('<file>', 'chain file (.jsonl, one receipt per line) or proof bundle (.json, format cairn.bundle/v1)')
    .addHelpText(
      'after',
      '\nExit status: 0 when the chain verifies (the head hash is printed), 1 when it is broken (E_CHAIN_BROKEN with the first bad seq), 2 when the file cannot be read.\nNo server is contacted.',
    )
    .action(async (file: string, _options: unknown, command: Command) => {
      const output = context.output(command);
      const { format, verification } = await verifyFile(file);
      if (!verification.ok) throw chainBrokenError(verification);
      const { human, machine } = formatVerified(verification, format, output);
      output.result(human, machine);
    });
}
