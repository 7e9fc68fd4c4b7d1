import { randomUUID } from 'node:crypto';
import { open, rename, rm, stat as statAsync } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { CairnError, EnvNameSchema, isCairnError, MAX_EXEC_STDIN_BYTES, MAX_SANDBOX_FILE_BYTES, MAX_SANDBOX_WAIT_SECONDS, SANDBOX_STATES, SandboxStateSchema, SecretNameSchema } from '@cairn/contracts';
import type { ExecRequest, Sandbox, SandboxSpec, SandboxState } from '@cairn/contracts';
import type { ExecSummary, Sandboxes } from '@cairn/sdk';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { EXIT_FAILED, usageError } from '../exit-codes.js';
import type { Output } from '../output.js';
import { formatQueueSpot, formatTable } from '../run-report.js';
import { readBoundedRegularFile } from '../run-spec.reader.js';
import { checkSandboxSpec, parseExecRequest, parseSandboxFilePath, parseSandboxId, sha256Hex } from '../sandbox-input.js';
import { resolveTarget } from '../stack/stack-target.js';
import { parseIdempotencyKey } from './follow-run.js';
import { parseLimit } from './status.command.js';

/*
 * `cairn sandbox create|exec|cp|ls|rm|show`: interactive sandbox sessions through the gateway
 * (`/v1/sandboxes…`). Every operation is a receipt on the sandbox's own chain (`sbx_…`), which
 * `cairn export` writes out and `cairn verify` checks. Arguments are checked before anything is
 * sent: a bad id, path, argv or option is E_INPUT (exit 2) and creates nothing.
 */

const UTF8 = new TextDecoder('utf-8', { fatal: true });

export interface SandboxStdin extends NodeJS.ReadableStream {
  isTTY?: boolean;
}

// ---- parsing (pure) ----

export function parsePositiveInt(value: string, option: string, max: number): number {
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(n) || n < 1 || n > max) throw usageError(`${option} takes a whole number from 1 to ${max}, got ${JSON.stringify(value)}`);
  return n;
}

export function parseCpus(value: string): number {
  const n = Number(value);
  if (!/^[0-9]+(\.[0-9]+)?$/.test(value) || !(n > 0) || n > 1024) throw usageError(`--cpus takes a positive number (e.g. 0.5), got ${JSON.stringify(value)}`);
  return n;
}

/** `--mode 0644`: octal permission bits, at most 0777 (no setuid, setgid or sticky bits). */
export function parseMode(value: string): number {
  if (!/^0?[0-7]{3}$/.test(value)) throw usageError(`--mode takes octal permission bits such as 0644 or 755, got ${JSON.stringify(value)}`);
  return parseInt(value, 8);
}

export function parseEnvPair(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const eq = value.indexOf('=');
  const name = eq === -1 ? value : value.slice(0, eq);
  if (eq === -1 || !EnvNameSchema.safeParse(name).success) throw usageError(`--env takes NAME=value with NAME in [A-Z_][A-Z0-9_]*, got ${JSON.stringify(value.slice(0, 80))}`);
  if (Object.hasOwn(previous, name)) throw usageError(`--env ${name} is given twice`);
  return { ...previous, [name]: value.slice(eq + 1) };
}

export function parseSecretList(value: string, previous: string[] = []): string[] {
  if (!SecretNameSchema.safeParse(value).success) throw usageError(`--secret takes a secret name [A-Z_][A-Z0-9_]*, got ${JSON.stringify(value.slice(0, 80))}`);
  if (previous.includes(value)) throw usageError(`--secret ${value} is given twice`);
  return [...previous, value];
}

export function parseSandboxState(value: string): SandboxState {
  const state = SandboxStateSchema.safeParse(value.toUpperCase());
  if (!state.success) throw usageError(`--state takes one of ${SANDBOX_STATES.join(', ')}, got ${JSON.stringify(value)}`);
  return state.data;
}

export interface CreateOptions {
  image?: string;
  ttl?: string;
  idle?: string;
  memory?: string;
  disk?: string;
  cpus?: string;
  wait?: string;
  secret?: string[];
}

/** The SandboxSpec the create options describe, checked against the contracts. */
export function sandboxSpecOf(options: CreateOptions): SandboxSpec {
  const caps: Record<string, number> = {};
  if (options.memory !== undefined) caps.memoryMiB = parsePositiveInt(options.memory, '--memory', 1_048_576);
  if (options.disk !== undefined) caps.diskMiB = parsePositiveInt(options.disk, '--disk', 16_777_216);
  if (options.cpus !== undefined) caps.cpus = parseCpus(options.cpus);
  const spec: Record<string, unknown> = {};
  if (options.image !== undefined) spec.image = options.image;
  if (options.ttl !== undefined) spec.ttlSeconds = parsePositiveInt(options.ttl, '--ttl', 86_400);
  if (options.idle !== undefined) spec.idleSeconds = parsePositiveInt(options.idle, '--idle', 86_400);
  if (options.wait !== undefined) spec.waitSeconds = parsePositiveInt(options.wait, '--wait', MAX_SANDBOX_WAIT_SECONDS);
  if (Object.keys(caps).length > 0) spec.caps = caps;
  if (options.secret !== undefined && options.secret.length > 0) spec.secrets = options.secret;
  return checkSandboxSpec(spec);
}

/** One side of `cairn sandbox cp`: a local path, `-`, or `<sandbox id>:<path>`. */
export type CopyEnd = { kind: 'local'; path: string } | { kind: 'std' } | { kind: 'sandbox'; sandboxId: string; path: string };

export function parseCopyEnd(value: string): CopyEnd {
  if (value === '-') return { kind: 'std' };
  const colon = value.indexOf(':');
  if (value.startsWith('sbx_') && colon !== -1) {
    return { kind: 'sandbox', sandboxId: parseSandboxId(value.slice(0, colon)), path: parseSandboxFilePath(value.slice(colon + 1)) };
  }
  if (value === '') throw usageError('cp: an empty path');
  if (value.includes('\0')) throw usageError('cp: a local path may not contain NUL');
  return { kind: 'local', path: value };
}

export type CopyPlan = { direction: 'in'; from: Exclude<CopyEnd, { kind: 'sandbox' }>; to: Extract<CopyEnd, { kind: 'sandbox' }> } | { direction: 'out'; from: Extract<CopyEnd, { kind: 'sandbox' }>; to: Exclude<CopyEnd, { kind: 'sandbox' }> };

/** Exactly one side is in a sandbox: `cp <local|-> <id>:<path>` or `cp <id>:<path> <local|->`. */
export function planCopy(source: string, target: string): CopyPlan {
  const from = parseCopyEnd(source);
  const to = parseCopyEnd(target);
  if (from.kind === 'sandbox' && to.kind === 'sandbox') throw usageError('cp copies between this machine and one sandbox: one side is <sbx id>:<path>, the other a local path or -');
  if (to.kind === 'sandbox') {
    if (from.kind === 'sandbox') throw usageError('unreachable');
    return { direction: 'in', from, to };
  }
  if (from.kind === 'sandbox') return { direction: 'out', from, to };
  throw usageError('cp needs a sandbox side: <sbx id>:<path> (e.g. sbx_abc:/work/a.txt)');
}

/**
 * The CLI's exit status after an exec: the program's own status; a limit hit (the sandbox is
 * destroyed) or a program killed without one is at least 1.
 */
export function execExitCode(summary: Pick<ExecSummary, 'exitCode' | 'limitHit' | 'errorCode'>): number {
  const code = summary.exitCode;
  if (code === null || code < 0) return EXIT_FAILED;
  if ((summary.limitHit !== null || summary.errorCode !== null) && code === 0) return EXIT_FAILED;
  return Math.min(code, 255);
}

// ---- formatting (pure) ----

export function formatSandboxDetails(sandbox: Sandbox): string {
  const caps = sandbox.caps === undefined ? '-' : JSON.stringify(sandbox.caps);
  const network = sandbox.network === undefined ? '-' : typeof sandbox.network === 'string' ? sandbox.network : JSON.stringify(sandbox.network);
  const rows: [string, string][] = [
    ['sandbox', sandbox.id],
    ['tenant', sandbox.tenant],
    ['state', sandbox.destroyReason == null ? sandbox.state : `${sandbox.state} (${sandbox.destroyReason})`],
    ['error', sandbox.errorCode ?? '-'],
    ['image', `${sandbox.image ?? '-'}${sandbox.imageId == null ? '' : `  ${sandbox.imageId}`}`],
    ['caps', caps],
    ['network', network],
    ['created', sandbox.createdAt],
    ['ready', sandbox.readyAt ?? '-'],
    ['expires', sandbox.expiresAt ?? '-'],
    ['active', `${sandbox.lastActivityAt ?? '-'}${sandbox.idleSeconds == null ? '' : `  (idle limit ${sandbox.idleSeconds} s)`}`],
    ['ops', String(sandbox.operations ?? '-')],
    ...(sandbox.queue === undefined ? [] : ([['queued', formatQueueSpot(sandbox.queue)]] as [string, string][])),
    ['chain', `${sandbox.headSeq ?? '-'} receipts  head ${sandbox.headHash ?? '-'}${sandbox.sealed === true ? '  sealed' : ''}`],
  ];
  return rows.map(([key, value]) => `${key.padEnd(9)}${value}`).join('\n');
}

export function formatSandboxTable(items: readonly Sandbox[]): string {
  if (items.length === 0) return 'no sandboxes';
  const state = (s: Sandbox) => (s.queue !== undefined ? `${s.state}(queued ${s.queue.position}/${s.queue.length})` : s.destroyReason == null ? s.state : `${s.state}(${s.destroyReason})`);
  return formatTable(
    ['SANDBOX', 'STATE', 'OPS', 'CREATED', 'EXPIRES', 'IMAGE'],
    items.map((s) => [s.id, state(s), String(s.operations ?? '-'), s.createdAt, s.expiresAt ?? '-', s.image ?? '-']),
  );
}

// ---- IO helpers ----

/** Everything on `stdin` up to `max` bytes; more is E_INPUT. */
export async function readAllBounded(stdin: NodeJS.ReadableStream, max: number, what: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stdin) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk);
    size += buffer.length;
    if (size > max) throw usageError(`${what} is larger than ${max} bytes`);
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

/** Writes and waits for the stream to take it (so a slow reader slows the exec's output, not memory). */
function writeTo(stream: NodeJS.WritableStream, bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.write(bytes, (error) => (error == null ? resolve() : reject(error)));
  });
}

/** Writes beside the target, then renames into place: a reader never sees half a file. */
async function writeFileAtomically(target: string, bytes: Uint8Array): Promise<void> {
  const temp = join(dirname(target), `.${basename(target)}.${randomUUID()}.part`);
  const handle = await open(temp, 'wx', 0o644);
  try {
    await handle.writeFile(bytes);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  try {
    await rename(temp, target);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}

function errnoOf(error: unknown): string {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : error instanceof Error ? error.message : String(error);
}

async function isDirectory(path: string): Promise<boolean> {
  return (await statAsync(path).catch(() => null))?.isDirectory() === true;
}

// ---- the commands ----

async function sandboxApi(context: CommandContext): Promise<Sandboxes> {
  const { client } = await resolveTarget(context.env);
  return client.sandboxes;
}

function reportExec(output: Output, summary: ExecSummary, sandboxId: string): void {
  if (summary.limitHit !== null) {
    output.note(`error ${summary.limitHit}: the program passed its sandbox's cap; sandbox ${sandboxId} is now ${summary.sandboxState}`);
  } else if (summary.errorCode !== null) {
    output.note(`error ${summary.errorCode}: exec ${summary.execId} in ${sandboxId} (exit ${summary.exitCode ?? 'none'})`);
  }
  if (summary.truncated) output.note(`(output truncated: ${summary.stdoutBytes} bytes of stdout, ${summary.stderrBytes} of stderr in all)`);
}

interface ExecOptions {
  workdir?: string;
  env?: Record<string, string>;
  timeout?: string;
  stdin: boolean;
}

export function registerSandboxCommand(program: Command, context: CommandContext, stdin: SandboxStdin = process.stdin): void {
  const sandbox = program
    .command('sandbox')
    .description('interactive sandbox sessions: create one, exec programs and copy files in and out, then remove it')
    .addHelpText(
      'after',
      '\nEvery operation is a receipt on the sandbox\'s own chain (sbx_…): `cairn export <sbx id>` writes it, `cairn verify` checks it.\n' +
        'Needs a key with runs:write (create, exec, cp into, rm) or runs:read (ls, show, cp out of); another tenant\'s sandbox is E_NOT_FOUND.',
    );

  sandbox
    .command('create')
    .description('start a hardened sandbox and wait until it is READY; prints its id')
    .option('--image <ref>', 'the image (default: the operator\'s, cairn/sandbox-busybox:1)')
    .option('--ttl <seconds>', 'destroy it after this long (default: the operator\'s TTL; at most 86400)')
    .option('--idle <seconds>', 'destroy it after this long without an operation (default: the operator\'s idle limit)')
    .option('--memory <mib>', 'memory cap in MiB')
    .option('--disk <mib>', 'disk (tmpfs) cap in MiB: it lives in memory, so the worker reserves memory + disk')
    .option('--cpus <n>', 'CPU cap, e.g. 0.5')
    .option('--wait <seconds>', `when no worker has room, wait this long in the queue (at most ${MAX_SANDBOX_WAIT_SECONDS}) instead of being refused at once`)
    .option('--secret <name>', 'a secret of the tenant\'s store, at /run/secrets/NAME (repeatable)', parseSecretList)
    .option('--idempotency-key <key>', 'the creation key (default: a random one); the same key and spec give the same sandbox')
    .addHelpText(
      'after',
      '\nPolicy judges image, caps and secrets: a refusal is E_POLICY_DENIED, nothing runs.\n' +
        'No worker with room is E_CAPACITY at once, naming what ran out (memory, slots, cpu, …) — or, with --wait, a place in the queue\n' +
        '(`cairn sandbox ls` shows it); no runtime at all is E_RUNTIME_ABSENT. A create that fails (or is interrupted) leaves nothing behind.\n' +
        '--json prints the sandbox view { ok, id, state, image, caps, expiresAt, … }.\nExit status: 0 READY, 1 refused or failed to start, 2 bad options (E_INPUT).',
    )
    .action(async (options: CreateOptions & { idempotencyKey?: string }, command: Command) => {
      const output = context.output(command);
      const spec = sandboxSpecOf(options);
      const key = options.idempotencyKey === undefined ? randomUUID() : parseIdempotencyKey(options.idempotencyKey);
      const api = await sandboxApi(context);
      const { view: created } = await api.create(spec, { idempotencyKey: key });
      output.result(created.id, { ok: true, ...created });
      if (!output.json) output.note(`${created.state}  image ${created.image ?? '-'}  expires ${created.expiresAt ?? '-'}`);
    });

  sandbox
    .command('exec')
    .description("run a program in a sandbox; its stdout and stderr stream here live, and the CLI exits with the program's status")
    .argument('<sandbox>', 'a sandbox id (sbx_…)')
    .argument('<argv...>', 'the program and its arguments (put -- before them: `cairn sandbox exec sbx_… -- ls -la`)')
    .option('--workdir <dir>', 'working directory under /work, /out or /tmp (default /work)')
    .option('--env <NAME=value>', 'an environment variable for this exec (repeatable; not for secrets: a command line is visible to `ps` — use create --secret)', parseEnvPair)
    .option('--timeout <seconds>', 'stop the program after this long (within the sandbox\'s wall-time cap)')
    .option('--no-stdin', 'do not forward stdin (it is forwarded, as UTF-8 text, when it is not a terminal)')
    .addHelpText(
      'after',
      '\nargv is an array (no shell): to use one, say so, e.g. -- sh -c \'echo $HOME\'.\n' +
        '--json waits for the end and prints one ExecResult { execId, exitCode, stdout, stderr, …, limitHit, seq }.\n' +
        'Exit status: the program\'s own; 1 also when a cap was hit (E_TIMEOUT, E_MEM_LIMIT, …: the sandbox is destroyed)\n' +
        'or the sandbox is gone (E_CONFLICT) or unknown (E_NOT_FOUND); 2 bad arguments (E_INPUT).',
    )
    .action(async (rawId: string, argv: string[], options: ExecOptions, command: Command) => {
      const output = context.output(command);
      const sandboxId = parseSandboxId(rawId);
      const request: ExecRequest = { argv };
      if (options.env !== undefined) request.env = options.env;
      if (options.workdir !== undefined) request.workdir = options.workdir;
      if (options.timeout !== undefined) request.timeoutSeconds = parsePositiveInt(options.timeout, '--timeout', 86_400);
      parseExecRequest(request);
      if (options.stdin && stdin.isTTY !== true) {
        const bytes = await readAllBounded(stdin, MAX_EXEC_STDIN_BYTES, 'stdin');
        if (bytes.length > 0) {
          try {
            request.stdin = UTF8.decode(bytes);
          } catch {
            throw usageError('stdin is not valid UTF-8 text: copy binary input in with `cairn sandbox cp` instead');
          }
        }
      }
      const api = await sandboxApi(context);
      if (output.json) {
        const result = await api.exec(sandboxId, request);
        output.result('', { ...result });
        context.exitCode = execExitCode(result);
        return;
      }
      const summary = await api.execStream(sandboxId, request, (stream, bytes) => writeTo(stream === 'stdout' ? context.streams.stdout : context.streams.stderr, bytes));
      reportExec(output, summary, sandboxId);
      context.exitCode = execExitCode(summary);
    });

  sandbox
    .command('cp')
    .description('copy a file into a sandbox or out of one (- is stdin or stdout)')
    .argument('<source>', 'a local file, -, or <sbx id>:<path>')
    .argument('<target>', '<sbx id>:<path>, or a local file (or directory), or -')
    .option('--mode <octal>', 'into a sandbox: the file\'s permission bits (default: the local file\'s, or 0644 from stdin)')
    .addHelpText(
      'after',
      '\nSandbox paths are absolute, below /work, /out or /tmp, without . or .. (a symlink on the way is refused: E_INPUT).\n' +
        'Files are at most 16 MiB. Both directions are receipts on the sandbox\'s chain (path, size, sha256); the bytes\n' +
        'read back are checked against the sha256 the gateway recorded.\n' +
        'Examples:\n  cairn sandbox cp script.py sbx_abc:/work/script.py\n  cairn sandbox cp sbx_abc:/out/report.json .\n  echo hi | cairn sandbox cp - sbx_abc:/work/hi.txt',
    )
    .action(async (source: string, target: string, options: { mode?: string }, command: Command) => {
      const output = context.output(command);
      const plan = planCopy(source, target);
      let mode = options.mode === undefined ? undefined : parseMode(options.mode);
      if (plan.direction === 'in') {
        let bytes: Buffer;
        if (plan.from.kind === 'std') {
          bytes = await readAllBounded(stdin, MAX_SANDBOX_FILE_BYTES, 'stdin');
        } else {
          const local = plan.from.path;
          bytes = await readBoundedRegularFile(local, MAX_SANDBOX_FILE_BYTES).catch((error: unknown) => {
            if (isCairnError(error)) throw error;
            throw usageError(`cannot read ${local}: ${errnoOf(error)}`, { path: local });
          });
          mode ??= (await statAsync(local)).mode & 0o777;
        }
        const api = await sandboxApi(context);
        const written = await api.writeFile(plan.to.sandboxId, plan.to.path, bytes, mode);
        const sha256 = sha256Hex(bytes);
        if (written.sha256 !== sha256 || written.bytes !== bytes.length) {
          throw new CairnError('E_INTERNAL', `the gateway recorded ${written.bytes} bytes with sha256 ${written.sha256}, but ${bytes.length} bytes with sha256 ${sha256} were sent`, { ...written });
        }
        output.result(`${output.okMark()}  ${written.bytes} bytes → ${plan.to.sandboxId}:${written.path}  sha256 ${written.sha256}  seq ${written.seq}`, {
          ok: true,
          sandboxId: plan.to.sandboxId,
          ...written,
        });
        return;
      }
      if (options.mode !== undefined) throw usageError('--mode applies to a copy into a sandbox');
      const to = plan.to;
      let localTarget: string | null = null;
      if (to.kind === 'local') localTarget = (await isDirectory(to.path)) ? join(to.path, basename(plan.from.path)) : to.path;
      const api = await sandboxApi(context);
      const read = await api.readFile(plan.from.sandboxId, plan.from.path);
      const summary = { ok: true, sandboxId: plan.from.sandboxId, path: plan.from.path, bytes: read.bytes.length, sha256: read.sha256, seq: read.seq };
      if (localTarget === null) {
        await writeTo(context.streams.stdout, read.bytes);
        output.note(`${read.bytes.length} bytes ← ${plan.from.sandboxId}:${plan.from.path}  sha256 ${read.sha256}  seq ${read.seq ?? '-'}`);
        return;
      }
      const file = localTarget;
      await writeFileAtomically(file, read.bytes).catch((error: unknown) => {
        throw usageError(`cannot write ${file}: ${errnoOf(error)}`, { path: file });
      });
      output.result(`${output.okMark()}  ${read.bytes.length} bytes ← ${plan.from.sandboxId}:${plan.from.path}  to ${file}  sha256 ${read.sha256}  seq ${read.seq ?? '-'}`, { ...summary, file });
    });

  sandbox
    .command('ls')
    .description("the tenant's sandboxes, newest first")
    .option('--state <state>', `only sandboxes in this state (${SANDBOX_STATES.join(', ')})`)
    .option('--limit <n>', 'how many to list (1–200)', '50')
    .action(async (options: { state?: string; limit: string }, command: Command) => {
      const output = context.output(command);
      const state = options.state === undefined ? undefined : parseSandboxState(options.state);
      const limit = parseLimit(options.limit);
      const api = await sandboxApi(context);
      const page = await api.list({ limit, ...(state === undefined ? {} : { state }) });
      output.result(formatSandboxTable(page.items), { ok: true, items: page.items, nextCursor: page.nextCursor });
    });

  sandbox
    .command('show')
    .description("one sandbox: state, image, caps, expiry, operations and its chain's head")
    .argument('<sandbox>', 'a sandbox id (sbx_…)')
    .action(async (rawId: string, _options: unknown, command: Command) => {
      const output = context.output(command);
      const sandboxId = parseSandboxId(rawId);
      const api = await sandboxApi(context);
      const view = await api.get(sandboxId);
      output.result(formatSandboxDetails(view), { ok: true, ...view });
    });

  sandbox
    .command('rm')
    .description('destroy sandboxes (a destroyed one stays listed, DESTROYED; removing it again is fine)')
    .argument('<sandbox...>', 'sandbox ids (sbx_…)')
    .addHelpText('after', '\nExit status: 0 all destroyed, 1 one was unknown (E_NOT_FOUND) or could not be destroyed (the others still are), 2 a bad id (nothing sent).')
    .action(async (rawIds: string[], _options: unknown, command: Command) => {
      const output = context.output(command);
      const ids = [...new Set(rawIds.map(parseSandboxId))];
      const api = await sandboxApi(context);
      const destroyed: Sandbox[] = [];
      const failed: { sandboxId: string; code: string; message: string }[] = [];
      let first: unknown = null;
      for (const id of ids) {
        try {
          const view = await api.destroy(id);
          destroyed.push(view);
          if (!output.json) output.result(`${output.okMark()}  ${view.id}  ${view.state}`, {});
        } catch (error) {
          if (!isCairnError(error)) throw error;
          first ??= error;
          failed.push({ sandboxId: id, code: error.code, message: error.message });
        }
      }
      if (first !== null && isCairnError(first)) {
        const message = failed.length === 1 ? first.message : `${failed.length} of ${ids.length} sandboxes were not destroyed; first: ${first.message}`;
        throw new CairnError(first.code, message, { ...first.details, destroyed: destroyed.map((s) => s.id), failed });
      }
      if (output.json) output.result('', { ok: true, items: destroyed });
    });
}
