import { createHash } from 'node:crypto';
import { ArgvSchema, CairnError, EnvSchema, ErrorCodeSchema, formatIssuePath, parseSandboxSpec, SandboxIdSchema, sandboxPathSchema, WorkdirSchema } from '@cairn/contracts';
import type { SandboxSpec } from '@cairn/contracts';
import { LineTooLongError, readLines } from '@cairn/evidence';
import { z } from 'zod';
import { usageError } from './exit-codes.js';
import { chainPath, QueueSpotSchema } from './gateway-client.js';
import type { GatewayClient } from './gateway-client.js';

/*
 * The CLI's side of the sandbox-session REST routes (`/v1/sandboxes…`): the views it reads, the
 * NDJSON exec stream, and raw file bytes in both directions. Input is checked here first, so a
 * bad id, path or argv is E_INPUT and no request is made.
 */

export const SANDBOX_STATES = ['PENDING', 'READY', 'DESTROYED', 'REJECTED', 'FAILED'] as const;

export const SandboxSchema = z.looseObject({
  id: z.string(),
  tenant: z.string(),
  state: z.string(),
  image: z.string().nullable(),
  imageId: z.string().nullable().optional(),
  createdAt: z.string(),
  readyAt: z.string().nullable().optional(),
  expiresAt: z.string().nullable().optional(),
  idleSeconds: z.number().nullable().optional(),
  lastActivityAt: z.string().nullable().optional(),
  operations: z.number().optional(),
  destroyReason: z.string().nullable().optional(),
  errorCode: z.string().nullable().optional(),
  headSeq: z.number().nullable().optional(),
  headHash: z.string().nullable().optional(),
  sealed: z.boolean().optional(),
  queue: QueueSpotSchema.optional(),
});
export type Sandbox = z.infer<typeof SandboxSchema>;

export const SandboxPageSchema = z.object({ items: z.array(SandboxSchema), nextCursor: z.string().nullable() });
export type SandboxPage = z.infer<typeof SandboxPageSchema>;

/** What an exec reports besides its output (the NDJSON stream's last `result` line). */
const ExecSummaryShape = {
  execId: z.string(),
  exitCode: z.number().int().nullable(),
  stdoutBytes: z.number(),
  stderrBytes: z.number(),
  stdoutSha256: z.string(),
  stderrSha256: z.string(),
  truncated: z.boolean(),
  durationMs: z.number(),
  limitHit: z.string().nullable(),
  errorCode: z.string().nullable(),
  seq: z.number().int(),
  sandboxState: z.string(),
};
export const ExecSummarySchema = z.looseObject(ExecSummaryShape);
export type ExecSummary = z.infer<typeof ExecSummarySchema>;
export const ExecResultSchema = z.looseObject({ ...ExecSummaryShape, stdout: z.string(), stderr: z.string() });
export type ExecResult = z.infer<typeof ExecResultSchema>;

export const ExecStreamLineSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('output'), stream: z.enum(['stdout', 'stderr']), data: z.base64() }),
  z.looseObject({ type: z.literal('result'), ...ExecSummaryShape }),
  z.looseObject({ type: z.literal('error'), code: z.string(), message: z.string() }),
]);
export type ExecStreamLine = z.infer<typeof ExecStreamLineSchema>;

export const FileWrittenSchema = z.looseObject({ path: z.string(), bytes: z.number(), sha256: z.string(), seq: z.number() });
export type FileWritten = z.infer<typeof FileWrittenSchema>;

/** What a sandbox file may be at most (the gateway refuses more). */
export const MAX_FILE_BYTES = 16 * 1024 * 1024;
/** What an exec's stdin may be at most: it travels inside the JSON request (the gateway takes 512 Ki characters). */
export const MAX_STDIN_BYTES = 512 * 1024;

/** Where a session's files may be read and written: below /work, /out or /tmp, normalised. */
export const SandboxFilePathSchema = sandboxPathSchema(['/work', '/out', '/tmp'], false);

export interface ExecRequest {
  argv: string[];
  env?: Record<string, string>;
  workdir?: string;
  stdin?: string;
  timeoutSeconds?: number;
}

const ExecRequestSchema = z.strictObject({
  argv: ArgvSchema,
  env: EnvSchema.optional(),
  workdir: WorkdirSchema.optional(),
  stdin: z.string().max(MAX_STDIN_BYTES).optional(),
  timeoutSeconds: z.number().int().positive().max(86_400).optional(),
});

function firstIssues(error: z.ZodError): string {
  return error.issues.map((issue) => `${formatIssuePath(issue.path) || '(request)'}: ${issue.message}`).join('; ');
}

export function parseSandboxId(value: string): string {
  const parsed = SandboxIdSchema.safeParse(value);
  if (!parsed.success) throw usageError(`invalid sandbox id ${JSON.stringify(value)}: a sandbox id is sbx_… in [a-z0-9_-]`, { sandboxId: value });
  return parsed.data;
}

export function parseSandboxFilePath(value: string): string {
  const parsed = SandboxFilePathSchema.safeParse(value);
  if (!parsed.success) throw usageError(`invalid sandbox path ${JSON.stringify(value)}: ${parsed.error.issues[0]?.message ?? 'not a path'}`, { path: value });
  return parsed.data;
}

/** An exec request checked against the contract's rules (argv, env names, workdir, timeout). */
export function parseExecRequest(request: ExecRequest): ExecRequest {
  const parsed = ExecRequestSchema.safeParse(request);
  if (!parsed.success) throw usageError(`invalid exec: ${firstIssues(parsed.error)}`, { issues: parsed.error.issues.map((i) => ({ path: formatIssuePath(i.path), message: i.message })) });
  return parsed.data;
}

/** A SandboxSpec checked against the contracts; E_INPUT names the field. */
export function checkSandboxSpec(spec: unknown): SandboxSpec {
  try {
    return parseSandboxSpec(spec);
  } catch (error) {
    if (error instanceof CairnError) throw usageError(error.message, error.details);
    throw error;
  }
}

/**
 * A line of the exec stream is one output chunk as base64 (a chunk fits a NATS message, at most
 * 1 MiB), a result or an error: anything longer is not the gateway's.
 */
export const MAX_EXEC_STREAM_LINE = 4 * 1024 * 1024;

/** One JSON value per line (`readLines`: "\n" only; blank lines skipped); a line that is not JSON, or too long, is E_INTERNAL. */
export async function* parseNdjson(body: AsyncIterable<Uint8Array>, maxLineLength = MAX_EXEC_STREAM_LINE): AsyncGenerator<unknown> {
  const parse = (line: string): unknown => {
    try {
      return JSON.parse(line) as unknown;
    } catch {
      throw new CairnError('E_INTERNAL', `the exec stream carried a line that is not JSON: ${line.slice(0, 80)}`);
    }
  };
  try {
    for await (const line of readLines(body, { maxLineLength })) if (line.trim() !== '') yield parse(line);
  } catch (error) {
    if (error instanceof LineTooLongError) throw new CairnError('E_INTERNAL', `the exec stream carried a line longer than ${maxLineLength} characters`, { line: error.line });
    throw error;
  }
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

const path = (id: string, rest = '') => `${chainPath(id)}${rest}`;
/** `POST /v1/sandboxes` waits up to about a minute for the sandbox to be ready. */
const CREATE_TIMEOUT_MS = 120_000;
const FILE_TIMEOUT_MS = 120_000;

export class SandboxApi {
  constructor(private readonly client: GatewayClient) {}

  /** `waitMs`: how long the spec lets it wait in the queue, on top of the create's own time. */
  create(spec: SandboxSpec, idempotencyKey: string, waitMs = 0): Promise<Sandbox> {
    return this.client.json('/v1/sandboxes', SandboxSchema, { method: 'POST', body: spec, headers: { 'idempotency-key': idempotencyKey }, timeoutMs: CREATE_TIMEOUT_MS + waitMs });
  }

  get(id: string): Promise<Sandbox> {
    return this.client.json(path(id), SandboxSchema);
  }

  list(query: { state?: string; limit?: number; cursor?: string } = {}): Promise<SandboxPage> {
    const params = new URLSearchParams();
    if (query.state !== undefined) params.set('state', query.state);
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    if (query.cursor !== undefined) params.set('cursor', query.cursor);
    const qs = params.toString();
    return this.client.json(`/v1/sandboxes${qs === '' ? '' : `?${qs}`}`, SandboxPageSchema);
  }

  destroy(id: string): Promise<Sandbox> {
    return this.client.json(path(id), SandboxSchema, { method: 'DELETE', timeoutMs: CREATE_TIMEOUT_MS });
  }

  /** One exec, its output whole in the answer (bounded by the gateway). No client timeout: the sandbox's caps bound it. */
  exec(id: string, request: ExecRequest): Promise<ExecResult> {
    return this.client.json(path(id, '/exec'), ExecResultSchema, { method: 'POST', body: request, timeoutMs: null });
  }

  /**
   * One exec streamed: `onOutput` gets each chunk of stdout/stderr as it arrives; resolves with
   * the result line. An `error` line, or a stream that ends without a result, is a CairnError.
   */
  async execStream(id: string, request: ExecRequest, onOutput: (stream: 'stdout' | 'stderr', bytes: Buffer) => Promise<void> | void): Promise<ExecSummary> {
    const where = `POST ${path(id, '/exec')}`;
    const response = await this.client.fetch(path(id, '/exec'), { method: 'POST', body: request, headers: { accept: 'application/x-ndjson' }, timeoutMs: null });
    if (!response.ok) throw await this.client.failure(response, where);
    if (response.body === null) throw new CairnError('E_INTERNAL', `${where}: the gateway answered no body`);
    for await (const value of parseNdjson(response.body)) {
      const line = ExecStreamLineSchema.safeParse(value);
      if (!line.success) throw new CairnError('E_INTERNAL', `${where}: the exec stream carried a line that does not match the REST contract: ${line.error.issues[0]?.message ?? ''}`);
      const event = line.data;
      if (event.type === 'output') await onOutput(event.stream, Buffer.from(event.data, 'base64'));
      else if (event.type === 'result') return ExecSummarySchema.parse(event);
      else {
        const code = ErrorCodeSchema.safeParse(event.code);
        throw new CairnError(code.success ? code.data : 'E_INTERNAL', event.message, { sandboxId: id });
      }
    }
    throw new CairnError('E_INTERNAL', `${where}: the exec stream ended before its result`, { sandboxId: id });
  }

  writeFile(id: string, filePath: string, bytes: Uint8Array, mode?: number): Promise<FileWritten> {
    const query = new URLSearchParams({ path: filePath });
    if (mode !== undefined) query.set('mode', mode.toString(8).padStart(4, '0'));
    return this.client.json(path(id, `/files?${query.toString()}`), FileWrittenSchema, { method: 'PUT', bytes, timeoutMs: FILE_TIMEOUT_MS });
  }

  /** A file's bytes, checked against the sha256 the gateway recorded for them. */
  async readFile(id: string, filePath: string): Promise<{ bytes: Buffer; sha256: string; seq: number | null }> {
    const where = `GET ${path(id, '/files')}`;
    const response = await this.client.fetch(path(id, `/files?${new URLSearchParams({ path: filePath }).toString()}`), {
      headers: { accept: 'application/octet-stream' },
      timeoutMs: FILE_TIMEOUT_MS,
    });
    if (!response.ok) throw await this.client.failure(response, where);
    const bytes = Buffer.from(await response.arrayBuffer());
    const sha256 = sha256Hex(bytes);
    const claimed = response.headers.get('x-cairn-sha256');
    if (claimed !== null && claimed !== sha256) {
      throw new CairnError('E_INTERNAL', `${where}: the bytes received hash to ${sha256}, but the gateway recorded ${claimed}`, { path: filePath, sha256, recorded: claimed });
    }
    const seq = Number(response.headers.get('x-cairn-seq'));
    return { bytes, sha256, seq: Number.isInteger(seq) && seq > 0 ? seq : null };
  }
}
