import { readFile } from 'node:fs/promises';
import { isCairnError } from '@cairn/contracts';
import type { Cairn } from '@cairn/sdk';
import type { NoteVerifier } from '@cairn/transparency';
import type { Command } from 'commander';
import { atomicTextFile } from '../chain-file.writer.js';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import type { Output } from '../output.js';
import { checkConsistency, openCheckpoint } from '../verify-log.js';
import { trustedKeys } from '../verify-seal.js';

/*
 * `cairn checkpoints`: the log of seal heads as a witness sees it (docs/proofs.md). `watch` keeps
 * the last checkpoint it verified in a state file (the signed note, as served: `cairn verify
 * --checkpoint` reads it too), and each time fetches the newest and the consistency proof from
 * the one kept, checks both against pinned keys, and fails loudly on a fork or a rollback.
 */

interface WatchOptions {
  state?: string;
  interval: string;
  once?: boolean;
  key: string[];
  trustFile: string[];
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

async function gatewayClient(context: CommandContext, url: string | undefined): Promise<Cairn> {
  const { resolveTarget } = await import('../stack/stack-target.js');
  if (url === undefined) return (await resolveTarget(context.env)).client;
  if (!/^https?:\/\/[^\s]+$/.test(url)) throw usageError(`${JSON.stringify(url)} is not an http:// or https:// URL of a Cairn gateway`);
  // A gateway named on the command line: its key from CAIRN_API_KEY, or the local stack's when it is that one.
  const env: NodeJS.ProcessEnv = { ...context.env, CAIRN_URL: url.replace(/\/+$/, '') };
  if (env.CAIRN_API_KEY === undefined || env.CAIRN_API_KEY === '') {
    const local = await resolveTarget(context.env).catch(() => null);
    if (local !== null && local.client.url === env.CAIRN_URL) env.CAIRN_API_KEY = local.apiKey;
  }
  return (await resolveTarget(env)).client;
}

async function readState(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return null;
    throw usageError(`cannot read the state file ${path}: ${(error as { code?: string }).code ?? 'unreadable'}`, { path });
  }
}

/** One witness pass: the newest checkpoint verified, consistent with the one kept; the state moved on only then. */
export async function witnessOnce(client: Cairn, trusted: readonly NoteVerifier[], statePath: string | undefined, kept: string | null): Promise<{ note: string; line: string; machine: Record<string, unknown> }> {
  const served = await client.tlog.checkpoint();
  const root = (c: { rootHash: Uint8Array }) => Buffer.from(c.rootHash).toString('base64');
  if (kept === null) {
    const opened = await openCheckpoint(served.checkpoint, trusted, 'the checkpoint served');
    if (statePath !== undefined) await atomicTextFile(statePath, served.checkpoint);
    return {
      note: served.checkpoint,
      line: `checkpoint ${opened.checkpoint.size}  root ${root(opened.checkpoint)}  signed by ${opened.key}: verified (first seen)`,
      machine: { ok: true, size: opened.checkpoint.size, rootHash: root(opened.checkpoint), grew: null, key: opened.key },
    };
  }
  const outcome = await checkConsistency(kept, served.checkpoint, trusted, (from, to) => client.tlog.consistency(from, to));
  if (statePath !== undefined && outcome.grew > 0) await atomicTextFile(statePath, served.checkpoint);
  return {
    note: outcome.grew > 0 ? served.checkpoint : kept,
    line: `checkpoint ${outcome.newer.size}  root ${root(outcome.newer)}  signed by ${outcome.key}: consistent with ${outcome.older.size} (+${outcome.grew})`,
    machine: { ok: true, size: outcome.newer.size, rootHash: root(outcome.newer), grew: outcome.grew, key: outcome.key },
  };
}

async function watch(context: CommandContext, output: Output, url: string, options: WatchOptions): Promise<void> {
  const trusted = await trustedKeys(options.key, options.trustFile);
  if (trusted.length === 0) throw usageError('a witness checks checkpoints against a pinned key: give --key or --trust-file');
  const interval = Number(options.interval);
  if (!Number.isFinite(interval) || interval < 0.1 || interval > 86_400) throw usageError('--interval is seconds, 0.1 to 86400');
  const client = await gatewayClient(context, url);
  let kept = options.state === undefined ? null : await readState(options.state);
  if (kept !== null) await openCheckpoint(kept, trusted, `the checkpoint kept in ${options.state ?? ''}`);
  for (;;) {
    try {
      const pass = await witnessOnce(client, trusted, options.state, kept);
      kept = pass.note;
      if (options.once === true) {
        output.result(`${output.okMark()}  ${pass.line}`, pass.machine);
        return;
      }
      output.note(`${new Date().toISOString()}  ${pass.line}`);
    } catch (error) {
      // A fork or a rollback is the witness's finding: stop, loudly. An outage is waited out.
      if (options.once === true || !isCairnError(error) || error.code !== 'E_UNAVAILABLE') throw error;
      output.note(`${new Date().toISOString()}  gateway unavailable: ${error.message}`);
    }
    await new Promise((resolve) => setTimeout(resolve, interval * 1000));
  }
}

export function registerCheckpointsCommand(program: Command, context: CommandContext): void {
  const checkpoints = program.command('checkpoints').description("the deployment's log of seal heads: signed checkpoints, and witnessing them");

  checkpoints
    .command('get')
    .description('print (or save) the latest signed checkpoint, as served: a signed note for `cairn verify --checkpoint`')
    .option('-o, --output <file>', 'write it to this file instead of stdout')
    .option('--gateway <url>', 'a gateway other than the local stack (its key from CAIRN_API_KEY)')
    .action(async (options: { output?: string; gateway?: string }, command: Command) => {
      const output = context.output(command);
      const served = await (await gatewayClient(context, options.gateway)).tlog.checkpoint();
      if (options.output === undefined) {
        context.streams.stdout.write(served.checkpoint);
        return;
      }
      await atomicTextFile(options.output, served.checkpoint);
      output.result(`${output.okMark()}  checkpoint ${served.size}  root ${served.rootHash}  to ${options.output}`, { ok: true, size: served.size, rootHash: served.rootHash, file: options.output });
    });

  checkpoints
    .command('watch')
    .description('witness a Cairn deployment: keep the last checkpoint verified, and fail loudly when a newer one does not extend it')
    .argument('<gateway-url>', 'the gateway to watch (http://…); its key from CAIRN_API_KEY, or the local stack’s when it is that one')
    .option('--state <file>', 'the last checkpoint verified (a signed note), read at start and replaced as the log grows')
    .option('--interval <seconds>', 'seconds between checks', '10')
    .option('--once', 'check once and exit')
    .option('--key <verifier-key>', 'a trusted seal key (<name>+<key id>+<base64>), pinned (repeatable)', collect, [])
    .option('--trust-file <file>', 'a file of trusted seal keys, one a line (repeatable)', collect, [])
    .addHelpText(
      'after',
      '\nEach check: GET /v1/tlog/checkpoint, verified against the pinned keys; with a checkpoint kept, GET /v1/tlog/proof/consistency\n' +
        'from its size to the new one, verified (RFC 9162). A smaller tree is E_CHAIN_BROKEN log_rolled_back, a tree that does not extend\n' +
        'the one kept checkpoint_inconsistent, a bad signature checkpoint_signature_invalid / checkpoint_key_unknown: the watch stops, exit 1.\n' +
        'An unreachable gateway is waited out (with --once it is exit 1). Exit 2 for bad options.',
    )
    .action(async (url: string, options: WatchOptions, command: Command) => {
      await watch(context, context.output(command), url, options);
    });
}

