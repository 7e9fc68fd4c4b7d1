import { createHash } from 'node:crypto';
import { ArgvSchema, CairnError, EnvSchema, parseSandboxSpec, SandboxIdSchema, sandboxPathSchema, SandboxSpecSchema, WorkdirSchema } from '@cairn/contracts';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { CairnSandboxes, ExecRequest } from './cairn-rest.client.js';
import { inputSchemaOf, parseArgs, verifyBundle } from './run-tools.js';

/*
 * The sandbox tools: an interactive session an agent drives step by step — create a hardened
 * sandbox, write files into it, run programs (argv arrays), read files back, destroy it. Each is
 * one REST request with the caller's key, and each is a receipt on the sandbox's own chain
 * (`sbx_…`). Arguments are checked here first: bad input is E_INPUT naming the field, and
 * nothing is sent.
 */

/** The most a file may be (the REST gateway refuses more). */
export const MAX_FILE_BYTES = 16 * 1024 * 1024;
/** Base64 of MAX_FILE_BYTES, rounded up. */
const MAX_BASE64_CHARS = Math.ceil(MAX_FILE_BYTES / 3) * 4;
const UTF8 = new TextDecoder('utf-8', { fatal: true });
/** An exec's stdin travels inside the JSON request; the REST gateway takes at most this many characters. */
const MAX_STDIN_CHARS = 512 * 1024;

const IdempotencyKeySchema = z.string().min(1).max(200).regex(/^[\x20-\x7E]+$/, 'printable ASCII only');
const SandboxIdArg = SandboxIdSchema.describe('The sandbox id (sbx_…) that sandbox_create returned.');
const FilePathArg = sandboxPathSchema(['/work', '/out', '/tmp'], false).describe('An absolute path below /work, /out or /tmp (no . or .. segments; a symlink on the way is refused).');
const EncodingArg = z.enum(['utf8', 'base64']);

const CreateArgsSchema = z.strictObject({
  ...SandboxSpecSchema.shape,
  idempotencyKey: IdempotencyKeySchema.optional().describe('Your key for this creation: calling again with the same key and spec gives the same sandbox (retry safely).'),
});

const ExecArgsSchema = z.strictObject({
  sandboxId: SandboxIdArg,
  argv: ArgvSchema.describe('The program and its arguments, an array (no shell: use ["sh", "-c", "…"] to have one).'),
  env: EnvSchema.optional().describe('Extra environment variables for this program.'),
  workdir: WorkdirSchema.optional().describe('Working directory under /work, /out or /tmp (default /work).'),
  stdin: z.string().max(MAX_STDIN_CHARS).optional().describe('Text given to the program on its standard input.'),
  timeoutSeconds: z.number().int().positive().max(86_400).optional().describe("Stop the program after this long (within the sandbox's wall-time cap)."),
});

const WriteArgsSchema = z.strictObject({
  sandboxId: SandboxIdArg,
  path: FilePathArg,
  content: z.string().max(MAX_BASE64_CHARS).describe('The file content: text (encoding utf8) or base64 bytes (encoding base64).'),
  encoding: EncodingArg.default('utf8').describe('How content is given: utf8 text (default) or base64 bytes.'),
  mode: z
    .string()
    .regex(/^0?[0-7]{3}$/, 'octal permission bits such as 0644 or 0755')
    .optional()
    .describe('Permission bits in octal, e.g. "0755" for a script (default 0644).'),
});

const ReadArgsSchema = z.strictObject({
  sandboxId: SandboxIdArg,
  path: FilePathArg,
  encoding: EncodingArg.default('utf8').describe('utf8 (default; bytes that are not valid UTF-8 come back as base64, and encoding says so) or base64.'),
});

const SandboxArgsSchema = z.strictObject({ sandboxId: SandboxIdArg });

const ListArgsSchema = z.strictObject({
  state: z.enum(['PENDING', 'READY', 'DESTROYED', 'REJECTED', 'FAILED']).optional().describe('Only sandboxes in this state.'),
  cursor: z.string().min(1).max(512).optional().describe('The previous page’s nextCursor.'),
  limit: z.number().int().min(1).max(200).default(50).describe('At most this many (1–200).'),
});

function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export interface SandboxTool {
  definition: Tool;
  call(sandboxes: CairnSandboxes, args: unknown): Promise<Record<string, unknown>>;
}

const WRITES = { readOnlyHint: false, openWorldHint: false } as const;

export const SANDBOX_TOOLS: readonly SandboxTool[] = [
  {
    definition: {
      name: 'sandbox_create',
      title: 'Create a sandbox',
      description:
        'Start an interactive hardened sandbox (no network unless policy allows egress; caps on memory, CPU, processes, disk and time) ' +
        'and wait until it is READY. Returns its view: id (sbx_…), state, image, caps, expiresAt. Use the id with sandbox_exec, ' +
        'sandbox_write_file and sandbox_read_file; call sandbox_destroy when done (it is destroyed anyway at expiresAt). ' +
        'Every operation is a receipt on the sandbox’s own evidence chain. Policy may refuse (E_POLICY_DENIED); bad input is E_INPUT. ' +
        'When every worker is full the answer is E_CAPACITY at once (details.resource says what ran out; try again after details.retryAfterSeconds), ' +
        'unless waitSeconds (at most 300) lets it wait in the queue for room; a failed create leaves nothing behind.',
      inputSchema: inputSchemaOf(CreateArgsSchema),
      annotations: { title: 'Create a sandbox', destructiveHint: false, idempotentHint: true, ...WRITES },
    },
    async call(sandboxes, args) {
      const { idempotencyKey, ...spec } = parseArgs(CreateArgsSchema, args);
      parseSandboxSpec(spec);
      return { ...(await sandboxes.createSandbox(spec, idempotencyKey)) };
    },
  },
  {
    definition: {
      name: 'sandbox_exec',
      title: 'Run a program in a sandbox',
      description:
        'Run one program (an argv array, never a shell string) in a READY sandbox and wait for it. Returns exitCode, stdout and stderr ' +
        '(UTF-8, at most 1 MiB kept each; truncated says if more was cut), their byte counts and sha256, durationMs, and seq (its receipt). ' +
        'A program that passes a cap sets limitHit (E_TIMEOUT, E_MEM_LIMIT, E_PROC_LIMIT, E_DISK_LIMIT) and the sandbox is destroyed ' +
        '(sandboxState DESTROYED). A destroyed or expired sandbox is E_CONFLICT.',
      inputSchema: inputSchemaOf(ExecArgsSchema),
      annotations: { title: 'Run a program in a sandbox', destructiveHint: true, idempotentHint: false, ...WRITES },
    },
    async call(sandboxes, args) {
      const { sandboxId, ...rest } = parseArgs(ExecArgsSchema, args);
      const request: ExecRequest = { argv: rest.argv };
      if (rest.env !== undefined) request.env = rest.env;
      if (rest.workdir !== undefined) request.workdir = rest.workdir;
      if (rest.stdin !== undefined) request.stdin = rest.stdin;
      if (rest.timeoutSeconds !== undefined) request.timeoutSeconds = rest.timeoutSeconds;
      return { sandboxId, ...(await sandboxes.exec(sandboxId, request)) };
    },
  },
  {
    definition: {
      name: 'sandbox_write_file',
      title: 'Write a file into a sandbox',
      description:
        'Write a file (at most 16 MiB) at a path below /work, /out or /tmp in a READY sandbox, replacing any file there. ' +
        'Returns path, bytes, sha256 and seq (its receipt on the chain).',
      inputSchema: inputSchemaOf(WriteArgsSchema),
      annotations: { title: 'Write a file into a sandbox', destructiveHint: true, idempotentHint: true, ...WRITES },
    },
    async call(sandboxes, args) {
      const { sandboxId, path, content, encoding, mode } = parseArgs(WriteArgsSchema, args);
      let bytes: Uint8Array;
      if (encoding === 'base64') {
        if (!z.base64().safeParse(content).success) throw new CairnError('E_INPUT', 'invalid arguments: content: not base64 (encoding is base64)', { issues: [{ path: 'content', message: 'not base64' }] });
        bytes = Buffer.from(content, 'base64');
      } else {
        bytes = Buffer.from(content, 'utf8');
      }
      if (bytes.length > MAX_FILE_BYTES) throw new CairnError('E_INPUT', `invalid arguments: content: ${bytes.length} bytes, more than ${MAX_FILE_BYTES}`, { issues: [{ path: 'content', message: 'too large' }] });
      const written = await sandboxes.writeFile(sandboxId, path, bytes, mode === undefined ? undefined : parseInt(mode, 8));
      const sha256 = sha256Hex(bytes);
      if (written.sha256 !== sha256) {
        throw new CairnError('E_INTERNAL', `the gateway recorded sha256 ${written.sha256} for ${path}, but the bytes sent hash to ${sha256}`, { sandboxId, path });
      }
      return { sandboxId, ...written };
    },
  },
  {
    definition: {
      name: 'sandbox_read_file',
      title: 'Read a file from a sandbox',
      description:
        'Read a file (at most 16 MiB) below /work, /out or /tmp of a READY sandbox. Returns content (UTF-8 text, or base64 when asked or when ' +
        'the bytes are not text: encoding says which), bytes, sha256 (checked here against the bytes) and seq (its receipt). A missing file is E_NOT_FOUND.',
      inputSchema: inputSchemaOf(ReadArgsSchema),
      annotations: { title: 'Read a file from a sandbox', readOnlyHint: true, openWorldHint: false },
    },
    async call(sandboxes, args) {
      const { sandboxId, path, encoding } = parseArgs(ReadArgsSchema, args);
      const read = await sandboxes.readFile(sandboxId, path);
      const sha256 = sha256Hex(read.bytes);
      if (read.sha256 !== null && read.sha256 !== sha256) {
        throw new CairnError('E_INTERNAL', `the bytes of ${path} hash to ${sha256}, but the gateway recorded ${read.sha256}`, { sandboxId, path });
      }
      let content: string | null = null;
      if (encoding === 'utf8') {
        try {
          content = UTF8.decode(read.bytes);
        } catch {
          content = null;
        }
      }
      const base = { sandboxId, path, bytes: read.bytes.length, sha256, seq: read.seq };
      return content === null ? { ...base, encoding: 'base64', content: Buffer.from(read.bytes).toString('base64') } : { ...base, encoding: 'utf8', content };
    },
  },
  {
    definition: {
      name: 'sandbox_destroy',
      title: 'Destroy a sandbox',
      description: 'Destroy a sandbox and seal its chain. Returns its view with state DESTROYED; destroying it again returns the same view.',
      inputSchema: inputSchemaOf(SandboxArgsSchema),
      annotations: { title: 'Destroy a sandbox', destructiveHint: true, idempotentHint: true, ...WRITES },
    },
    async call(sandboxes, args) {
      const { sandboxId } = parseArgs(SandboxArgsSchema, args);
      return { ...(await sandboxes.destroySandbox(sandboxId)) };
    },
  },
  {
    definition: {
      name: 'sandbox_list',
      title: 'List sandboxes',
      description: "The key's tenant's sandboxes, newest first: id, state, image, expiresAt, operations, head of the chain. Page with cursor = the previous nextCursor.",
      inputSchema: inputSchemaOf(ListArgsSchema),
      annotations: { title: 'List sandboxes', readOnlyHint: true, openWorldHint: false },
    },
    async call(sandboxes, args) {
      const { state, cursor, limit } = parseArgs(ListArgsSchema, args);
      const page = await sandboxes.listSandboxes({ limit, ...(state === undefined ? {} : { state }), ...(cursor === undefined ? {} : { cursor }) });
      return { items: page.items, nextCursor: page.nextCursor };
    },
  },
  {
    definition: {
      name: 'sandbox_verify',
      title: 'Verify a sandbox’s chain',
      description:
        "Fetch the sandbox's proof bundle and verify it here, not trusting the server: recompute every receipt hash from genesis " +
        '(sandbox.requested … each exec and file … sandbox.destroyed, run.sealed) and check the head. Returns ok with the count, head hash ' +
        'and sealed (true once destroyed); a broken chain is the tool error E_CHAIN_BROKEN naming the first bad seq ' +
        '(reason break_recorded when the receipts verify but the chain records that it was broken, at the seq of that record).',
      inputSchema: inputSchemaOf(SandboxArgsSchema),
      annotations: { title: 'Verify a sandbox’s chain', readOnlyHint: true, openWorldHint: false },
    },
    async call(sandboxes, args) {
      const { sandboxId } = parseArgs(SandboxArgsSchema, args);
      const { runId: _chain, ...verified } = verifyBundle(await sandboxes.sandboxBundle(sandboxId), sandboxId);
      return { sandboxId, ...verified };
    },
  },
];
