import { BUNDLE_V2_FORMAT, CairnError, ChainIdSchema } from '@cairn/contracts';
import type { ProofBundleV2 } from '@cairn/contracts';
import { sealOfReceipt } from '@cairn/transparency';
import { ChainVerifier } from '@cairn/evidence';
import type { Command } from 'commander';
import { atomicFileSink, stdoutSink } from '../chain-file.writer.js';
import type { ChainFileSink } from '../chain-file.writer.js';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import type { Output } from '../output.js';
import { verifyBundleDocument } from '../verify-file.js';
import { chainBrokenError } from './verify.command.js';

interface ExportOptions {
  output?: string;
  bundle?: boolean;
}

/**
 * `cairn export --bundle`: a cairn.bundle/v2 from the stack's gateway — the chain's v1 bundle, its
 * seal's signature, its inclusion proof in the log of seal heads with the checkpoint it leads to,
 * and the keys the deployment publishes — verified here before it is written, like any fetch.
 */
async function exportBundle(context: CommandContext, output: Output, chainId: string, file: string | undefined): Promise<void> {
  if (chainId.startsWith('adm_')) throw usageError('an admin chain is never sealed: it has no place in the log of seal heads (export it as a chain file)', { chainId });
  const { resolveTarget } = await import('../stack/stack-target.js');
  const { client } = await resolveTarget(context.env);
  const bundle = await client.chains.bundle(chainId);
  const seal = sealOfReceipt(bundle.receipts.at(-1));
  if (seal.kind === 'not_sealed') throw new CairnError('E_NOT_FOUND', `${chainId} is not sealed: a cairn.bundle/v2 proves a seal`, { chainId, reason: 'not_sealed' });
  if (seal.kind === 'unsigned') throw new CairnError('E_UNAVAILABLE', `the seal of ${chainId} is not signed (its grader had no seal key): no cairn.bundle/v2 for it`, { chainId, reason: 'seal_unsigned' });
  const inclusion = await client.tlog.inclusion(chainId);
  const { keys } = await client.operator.sealKeys();
  const v2: ProofBundleV2 = { ...bundle, format: BUNDLE_V2_FORMAT, sealSignature: seal.fields, inclusion, sealKeys: keys.map((k) => k.key) };
  // As `cairn verify` will: the chain, the claims; the proofs themselves are checked against a pinned key there.
  const checked = verifyBundleDocument(v2, `the bundle of ${chainId}`);
  if (!checked.verification.ok) throw chainBrokenError(checked.verification);
  if (checked.verification.chainId !== chainId) throw new CairnError('E_CHAIN_BROKEN', `asked for ${chainId}, the gateway sent the chain of ${checked.verification.chainId ?? '?'}`, { reason: 'run_id_mismatch' });
  const sink = file === undefined ? stdoutSink(context.streams.stdout) : await atomicFileSink(file);
  try {
    await sink.writeReceipt(v2);
    await sink.commit();
  } catch (error) {
    await sink.abort();
    throw error;
  }
  const summary = `exported ${BUNDLE_V2_FORMAT}  chain ${chainId}  ${bundle.receipts.length} receipts  head ${checked.verification.headHash}  leaf ${inclusion.leafIndex} of ${inclusion.treeSize}`;
  if (file === undefined) output.note(summary);
  else {
    output.result(`${output.okMark()}  ${summary}  to ${file}`, {
      ok: true,
      format: BUNDLE_V2_FORMAT,
      chainId,
      count: bundle.receipts.length,
      headHash: checked.verification.headHash,
      leafIndex: inclusion.leafIndex,
      treeSize: inclusion.treeSize,
      file,
    });
  }
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
    .option('--bundle', "write a proof bundle cairn.bundle/v2 instead (from the stack's gateway): the chain, its seal's signature, its inclusion proof and the checkpoint")
    .addHelpText(
      'after',
      '\nReads from NATS JetStream (CAIRN_NATS_URL, CAIRN_EVIDENCE_STREAM, CAIRN_EVIDENCE_SUBJECT_PREFIX; unset ones come from\n' +
        'the stack started by `cairn up` in CAIRN_HOME, if any).\n' +
        'With --bundle it reads the gateway instead (CAIRN_HOME, or CAIRN_URL + CAIRN_API_KEY): GET …/bundle, GET /v1/tlog/proof/inclusion,\n' +
        'GET /.well-known/cairn/keys; check the file with `cairn verify <file> --key …` (offline).\n' +
        'Exit status: 0 exported, 1 unknown chain (E_NOT_FOUND), chain broken in the log or NATS unreachable, 2 bad chain id.',
    )
    .action(async (rawChainId: string, options: ExportOptions, command: Command) => {
      const output = context.output(command);
      const chainId = parseChainId(rawChainId);
      if (options.bundle === true) {
        await exportBundle(context, output, chainId, options.output);
        return;
      }
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
