import { createHash, randomUUID } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { ArtifactPathParamSchema, CairnError, isCairnError, StepIndexSchema } from '@cairn/contracts';
import type { Artifact, OutputStream, RunArtifacts } from '@cairn/contracts';
import type { Bytes, Cairn } from '@cairn/sdk';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import type { CliStreams } from '../output.js';
import { formatTable } from '../run-report.js';
import { resolveTarget } from '../stack/stack-target.js';
import { parseRunId } from './status.command.js';

/*
 * `cairn logs <run>` and `cairn artifacts <run> [path]`: what a run printed and wrote, read back
 * from the gateway — the bytes the artifact store holds, checked against the sha256 its receipts
 * record (by the gateway before it serves them, and here again). Bytes go out exactly as kept:
 * to stdout (or a file), never re-encoded.
 */

/** What is read whole before it is printed (a file written with -o is streamed, of any size). */
export const PRINT_MAX_BYTES = 256 * 1024 * 1024;
const UTF8 = new TextDecoder('utf-8', { fatal: true });

export function parseStep(value: string): number {
  const step = StepIndexSchema.safeParse(/^(0|[1-9][0-9]*)$/.test(value) ? Number(value) : Number.NaN);
  if (!step.success) throw usageError(`--step takes a step index (0, 1, 2, …; at most 63), got ${JSON.stringify(value)}`);
  return step.data;
}

/** An artifact path as the run recorded it (`/out/report.json`); the leading `/` may be left out. */
export function parseArtifactPath(value: string): string {
  const path = ArtifactPathParamSchema.safeParse(value);
  if (!path.success) throw usageError(`invalid artifact path ${JSON.stringify(value.slice(0, 200))}: ${path.error.issues[0]?.message ?? 'not a path'}`, { path: value.slice(0, 200) });
  return path.data;
}

/** Which streams `cairn logs` prints, and where. */
export function logStreams(options: { stdout?: boolean; stderr?: boolean }): { streams: OutputStream[]; separate: boolean } {
  if (options.stdout === true && options.stderr === true) return { streams: ['stdout', 'stderr'], separate: true };
  if (options.stdout === true) return { streams: ['stdout'], separate: false };
  if (options.stderr === true) return { streams: ['stderr'], separate: false };
  return { streams: ['stdout', 'stderr'], separate: true };
}

function writeAll(stream: NodeJS.WritableStream, bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => stream.write(bytes, (error) => (error == null ? resolve() : reject(error))));
}

/** Bytes in a JSON result: UTF-8 text when they are, else base64 (the encoding says which). */
export function encoded(bytes: Uint8Array): { encoding: 'utf8' | 'base64'; content: string } {
  try {
    return { encoding: 'utf8', content: UTF8.decode(bytes) };
  } catch {
    return { encoding: 'base64', content: Buffer.from(bytes).toString('base64') };
  }
}

function formatBytes(bytes: number | null): string {
  if (bytes === null) return 'missing';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

export function formatArtifactTable(listed: RunArtifacts): string {
  const rows = [
    ...listed.steps.flatMap((step) => [
      [`steps[${step.index}].stdout`, formatBytes(step.stdout.bytes), step.stdout.sha256],
      [`steps[${step.index}].stderr`, formatBytes(step.stderr.bytes), step.stderr.sha256],
    ]),
    ...listed.items.map((item: Artifact) => [item.path, formatBytes(item.bytes), item.sha256]),
  ];
  return rows.length === 0 ? 'no outputs recorded yet' : formatTable(['OUTPUT', 'BYTES', 'SHA256'], rows);
}

/**
 * Streams a file to `target` beside it, hashing as it goes; renamed into place only when the bytes
 * hash to what the gateway named, else removed and E_INTERNAL. A reader never sees half a file.
 */
async function downloadTo(client: Cairn, runId: string, path: string, target: string): Promise<{ sha256: string; bytes: number }> {
  const opened = await client.runs.openArtifact(runId, path);
  const temp = join(dirname(target), `.${basename(target)}.${randomUUID()}.part`);
  const handle = await open(temp, 'wx', 0o644);
  const hash = createHash('sha256');
  let bytes = 0;
  try {
    const reader = opened.body.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      hash.update(value);
      bytes += value.byteLength;
      await handle.write(value);
    }
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  const sha256 = hash.digest('hex');
  if (sha256 !== opened.sha256 || (opened.bytes !== null && bytes !== opened.bytes)) {
    await rm(temp, { force: true });
    throw new CairnError('E_INTERNAL', `${path}: the ${bytes} bytes received hash to ${sha256}, but the gateway named ${opened.sha256}; nothing was written`, { path, sha256, named: opened.sha256 });
  }
  try {
    await rename(temp, target);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
  return { sha256, bytes };
}

async function printBytes(streams: CliStreams, read: Bytes): Promise<void> {
  if (read.bytes.byteLength > 0) await writeAll(streams.stdout, read.bytes);
}

export function registerLogsCommand(program: Command, context: CommandContext): void {
  program
    .command('logs')
    .description("what a run's steps printed: each step's stdout and stderr, exactly as kept (redacted, bounded), checked against its receipt")
    .argument('<run>', 'a run id (run_…)')
    .option('--step <n>', 'only this step (0, 1, …)')
    .option('--stdout', 'only stdout (printed on stdout)')
    .option('--stderr', 'only stderr (printed on stdout, to pipe or save)')
    .addHelpText(
      'after',
      "\nWithout --stdout or --stderr each step's stdout goes to stdout and its stderr to stderr, as `docker logs` does.\n" +
        'Every byte is checked against the sha256 the chain records before it is printed; output whose bytes do not match is refused.\n' +
        '--json prints { ok, runId, steps: [{ index, name, exitCode, stdout?, stderr? }] }, each stream { sha256, bytes, encoding, content }.\n' +
        'Exit status: 0 ok, 1 an unknown run or step (E_NOT_FOUND), bytes that do not match (E_INTERNAL), the stack unreachable; 2 bad arguments.',
    )
    .action(async (rawRun: string, options: { step?: string; stdout?: boolean; stderr?: boolean }, command: Command) => {
      const output = context.output(command);
      const runId = parseRunId(rawRun);
      const only = options.step === undefined ? null : parseStep(options.step);
      const { streams, separate } = logStreams(options);
      const { client } = await resolveTarget(context.env);
      const listed = await client.runs.artifacts(runId);
      const steps = listed.steps.filter((step) => only === null || step.index === only);
      if (only !== null && steps.length === 0) throw new CairnError('E_NOT_FOUND', `run ${runId} has no completed step ${only}`, { runId, step: only });
      const machine: Record<string, unknown>[] = [];
      for (const step of steps) {
        const entry: Record<string, unknown> = { index: step.index, name: step.name, exitCode: step.exitCode };
        for (const stream of streams) {
          const read = await client.runs.output(runId, step.index, stream, { maxBytes: PRINT_MAX_BYTES, expectedSha256: step[stream].sha256 });
          if (output.json) entry[stream] = { sha256: read.sha256, bytes: read.bytes.byteLength, truncated: step[stream].truncated, ...encoded(read.bytes) };
          else if (separate && stream === 'stderr') await writeAll(context.streams.stderr, read.bytes);
          else await printBytes(context.streams, read);
        }
        machine.push(entry);
      }
      if (output.json) output.result('', { ok: true, runId, steps: machine });
      else if (steps.length === 0) output.note(`run ${runId} has no completed step yet`);
    });
}

export function registerArtifactsCommand(program: Command, context: CommandContext): void {
  program
    .command('artifacts')
    .description("the files a run collected (and its steps' streams): listed, or one printed or saved, checked against its receipt")
    .argument('<run>', 'a run id (run_…)')
    .argument('[path]', 'a collected file, as listed (/out/report.json): its bytes go to stdout, or to -o')
    .option('-o, --output <file>', 'write the file here (streamed, checked, then renamed into place) instead of stdout')
    .addHelpText(
      'after',
      '\nWithout a path: OUTPUT, BYTES and SHA256 of each step\'s stdout and stderr and of each collected file.\n' +
        'With a path: its bytes, exactly as collected (after redaction), checked against the sha256 the chain records.\n' +
        '--json: the listing { ok, runId, steps, items }; with a path { ok, runId, path, sha256, bytes, file } (-o) or the content\n' +
        '(encoding utf8 or base64).\n' +
        'Exit status: 0 ok, 1 an unknown run or path (E_NOT_FOUND), bytes that do not match (E_INTERNAL), the stack unreachable; 2 bad arguments.',
    )
    .action(async (rawRun: string, rawPath: string | undefined, options: { output?: string }, command: Command) => {
      const output = context.output(command);
      const runId = parseRunId(rawRun);
      const path = rawPath === undefined ? null : parseArtifactPath(rawPath);
      if (path === null && options.output !== undefined) throw usageError('-o names where to write one file: give its path too');
      const { client } = await resolveTarget(context.env);
      if (path === null) {
        const listed = await client.runs.artifacts(runId);
        output.result(formatArtifactTable(listed), { ok: true, ...listed });
        return;
      }
      if (options.output !== undefined) {
        const target = options.output;
        const written = await downloadTo(client, runId, path, target).catch((error: unknown) => {
          if (isCairnError(error)) throw error;
          throw usageError(`cannot write ${target}: ${error instanceof Error ? error.message : String(error)}`, { file: target });
        });
        output.result(`${output.okMark()}  ${written.bytes} bytes of ${runId}:${path} → ${target}  sha256 ${written.sha256}`, { ok: true, runId, path, ...written, file: target });
        return;
      }
      const read = await client.runs.artifact(runId, path, { maxBytes: PRINT_MAX_BYTES });
      if (output.json) {
        output.result('', { ok: true, runId, path, sha256: read.sha256, bytes: read.bytes.byteLength, ...encoded(read.bytes) });
        return;
      }
      await printBytes(context.streams, read);
    });
}
