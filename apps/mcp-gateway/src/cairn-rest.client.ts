import { CairnError, ErrorCodeSchema, isCairnError } from '@cairn/contracts';
import { z } from 'zod';

/*
 * The MCP gateway's side of the REST contract: every tool call is one request to the Cairn REST
 * gateway with the caller's own key, so MCP goes through the same authentication, tenancy,
 * policy and chain as every other client (no side door). Failures come back as CairnErrors with
 * the REST gateway's code, or E_UNAVAILABLE when it does not answer.
 */

export const RunSchema = z.looseObject({
  runId: z.string(),
  tenant: z.string(),
  state: z.string(),
  errorCode: z.string().nullable(),
  verdict: z.string().nullable(),
  score: z.number().nullable(),
  maxScore: z.number().nullable(),
  eventCount: z.number(),
  headHash: z.string().nullable(),
  sealed: z.boolean(),
});
export type Run = z.infer<typeof RunSchema>;

export const SubmittedSchema = z.object({ runId: z.string(), state: z.string(), duplicate: z.boolean() });
export type Submitted = z.infer<typeof SubmittedSchema>;

/** A receipt exactly as stored: snake_case body plus `prev_hash`/`hash`. */
export const ReceiptSchema = z.looseObject({ seq: z.number().int().min(1), type: z.string(), run_id: z.string(), hash: z.string() });

export const EventPageSchema = z.object({ items: z.array(ReceiptSchema), nextAfter: z.number().nullable() });
export type EventPage = z.infer<typeof EventPageSchema>;

export const BundleSchema = z.looseObject({
  format: z.string(),
  runId: z.string(),
  receipts: z.array(z.unknown()),
  verdict: z.string().nullable(),
  grade: z.looseObject({ score: z.number(), maxScore: z.number(), upperBound: z.number() }).nullable(),
  headHash: z.string().nullable(),
});
export type Bundle = z.infer<typeof BundleSchema>;

/** A sandbox session as the REST gateway shows it (`GET /v1/sandboxes/:id`). */
export const SandboxSchema = z.looseObject({
  id: z.string(),
  tenant: z.string(),
  state: z.string(),
  image: z.string().nullable(),
  createdAt: z.string(),
  expiresAt: z.string().nullable().optional(),
  operations: z.number().optional(),
  destroyReason: z.string().nullable().optional(),
  errorCode: z.string().nullable().optional(),
  headSeq: z.number().nullable().optional(),
  headHash: z.string().nullable().optional(),
  sealed: z.boolean().optional(),
});
export type Sandbox = z.infer<typeof SandboxSchema>;

export const SandboxPageSchema = z.object({ items: z.array(SandboxSchema), nextCursor: z.string().nullable() });
export type SandboxPage = z.infer<typeof SandboxPageSchema>;

/** `POST /v1/sandboxes/:id/exec` answered as JSON: the output whole (bounded), and what the receipt says. */
export const ExecResultSchema = z.looseObject({
  execId: z.string(),
  exitCode: z.number().int().nullable(),
  stdout: z.string(),
  stderr: z.string(),
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
});
export type ExecResult = z.infer<typeof ExecResultSchema>;

export const FileWrittenSchema = z.looseObject({ path: z.string(), bytes: z.number(), sha256: z.string(), seq: z.number() });
export type FileWritten = z.infer<typeof FileWrittenSchema>;

export interface FileRead {
  bytes: Uint8Array;
  /** What the gateway recorded for these bytes (`X-Cairn-Sha256`), and the receipt's seq. */
  sha256: string | null;
  seq: number | null;
}

export interface ExecRequest {
  argv: string[];
  env?: Record<string, string>;
  workdir?: string;
  stdin?: string;
  timeoutSeconds?: number;
}

const RunListSchema = z.object({ items: z.array(z.unknown()), nextCursor: z.string().nullable() });
const ErrorResponseSchema = z.object({ code: ErrorCodeSchema, message: z.string(), details: z.record(z.string(), z.unknown()).optional() });

const REQUEST_TIMEOUT_MS = 30_000;

/** What the run tools need from Cairn; a port, so the tools are testable without a gateway. */
export interface CairnRuns {
  submitRun(spec: unknown, idempotencyKey: string): Promise<Submitted>;
  getRun(runId: string): Promise<Run>;
  events(runId: string, after: number, limit: number): Promise<EventPage>;
  bundle(runId: string): Promise<Bundle>;
}

/** What the sandbox tools need from Cairn; a port like CairnRuns. */
export interface CairnSandboxes {
  createSandbox(spec: unknown, idempotencyKey?: string): Promise<Sandbox>;
  getSandbox(sandboxId: string): Promise<Sandbox>;
  listSandboxes(query: { state?: string; cursor?: string; limit?: number }): Promise<SandboxPage>;
  exec(sandboxId: string, request: ExecRequest): Promise<ExecResult>;
  writeFile(sandboxId: string, path: string, bytes: Uint8Array, mode?: number): Promise<FileWritten>;
  readFile(sandboxId: string, path: string): Promise<FileRead>;
  destroySandbox(sandboxId: string): Promise<Sandbox>;
  /** The proof bundle of the sandbox's chain (the format names the chain `runId`). */
  sandboxBundle(sandboxId: string): Promise<Bundle>;
}

/** A key as GET /v1/keys lists it: never a secret. */
const KeyViewSchema = z.looseObject({
  id: z.string(),
  tenant: z.string(),
  prefix: z.string(),
  lastFour: z.string().nullable(),
  scopes: z.array(z.string()),
  status: z.string(),
  createdAt: z.string(),
  expiresAt: z.string().nullable(),
  revokedAt: z.string().nullable(),
});
const KeyListSchema = z.object({ items: z.array(KeyViewSchema) });
export type KeyList = z.infer<typeof KeyListSchema>;

/** What the key tools need from Cairn: the listing only (see key-tools.ts). */
export interface CairnKeys {
  listKeys(): Promise<KeyList>;
}

/** `POST /v1/sandboxes` waits (bounded) for the sandbox to be ready; an exec lasts as long as its program. */
const CREATE_TIMEOUT_MS = 120_000;
const EXEC_TIMEOUT_MS = 24 * 3600 * 1000;

export class CairnRestClient implements CairnRuns, CairnSandboxes, CairnKeys {
  private readonly baseUrl: string;

  constructor(
    url: string,
    private readonly apiKey: string,
  ) {
    this.baseUrl = url.replace(/\/+$/, '');
  }

  private async send(
    path: string,
    init: { method?: 'GET' | 'POST' | 'PUT' | 'DELETE'; body?: unknown; bytes?: Uint8Array; headers?: Record<string, string>; timeoutMs?: number },
  ): Promise<Response> {
    const method = init.method ?? 'GET';
    const headers: Record<string, string> = { accept: 'application/json', authorization: `Bearer ${this.apiKey}`, ...init.headers };
    let body: string | Uint8Array | undefined;
    if (init.bytes !== undefined) {
      headers['content-type'] = 'application/octet-stream';
      body = init.bytes;
    } else if (init.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(init.body);
    }
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body }),
        signal: AbortSignal.timeout(init.timeoutMs ?? REQUEST_TIMEOUT_MS),
      });
    } catch (error) {
      const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : error instanceof Error ? error.message : String(error);
      throw new CairnError('E_UNAVAILABLE', `cannot reach the Cairn REST gateway at ${this.baseUrl}: ${cause}`);
    }
    if (!response.ok) {
      const text = await response.text().catch(() => '');
      let parsed: unknown = undefined;
      try {
        parsed = text === '' ? undefined : JSON.parse(text);
      } catch {
        // not JSON: judged below
      }
      const failure = ErrorResponseSchema.safeParse(parsed);
      if (failure.success) throw new CairnError(failure.data.code, failure.data.message, failure.data.details);
      throw new CairnError('E_INTERNAL', `${method} ${path.split('?')[0] ?? path}: the Cairn REST gateway answered HTTP ${response.status}`, { status: response.status });
    }
    return response;
  }

  private async request<S extends z.ZodType>(
    path: string,
    schema: S,
    init: { method?: 'GET' | 'POST' | 'PUT' | 'DELETE'; body?: unknown; bytes?: Uint8Array; headers?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<z.infer<S>> {
    const method = init.method ?? 'GET';
    const response = await this.send(path, init);
    const text = await response.text().catch(() => '');
    let body: unknown = undefined;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      // not JSON: judged below
    }
    const parsed = schema.safeParse(body);
    if (!parsed.success) throw new CairnError('E_INTERNAL', `${method} ${path.split('?')[0] ?? path}: the Cairn REST gateway's answer does not match the REST contract`);
    return parsed.data;
  }

  /**
   * Checks that the key is one the REST gateway knows: E_UNAUTHORIZED when it is not. A known
   * key that may not read runs (E_FORBIDDEN) is still a key; its tool calls fail one by one.
   */
  async checkKey(): Promise<void> {
    try {
      await this.request('/v1/runs?limit=1', RunListSchema, { timeoutMs: 10_000 });
    } catch (error) {
      if (isCairnError(error) && error.code === 'E_FORBIDDEN') return;
      throw error;
    }
  }

  listKeys(): Promise<KeyList> {
    return this.request('/v1/keys', KeyListSchema);
  }

  submitRun(spec: unknown, idempotencyKey: string): Promise<Submitted> {
    return this.request('/v1/runs', SubmittedSchema, { method: 'POST', body: spec, headers: { 'idempotency-key': idempotencyKey } });
  }

  getRun(runId: string): Promise<Run> {
    return this.request(`/v1/runs/${encodeURIComponent(runId)}`, RunSchema);
  }

  events(runId: string, after: number, limit: number): Promise<EventPage> {
    const query = new URLSearchParams({ after: String(after), limit: String(limit) });
    return this.request(`/v1/runs/${encodeURIComponent(runId)}/events?${query.toString()}`, EventPageSchema);
  }

  bundle(runId: string): Promise<Bundle> {
    return this.request(`/v1/runs/${encodeURIComponent(runId)}/bundle`, BundleSchema, { timeoutMs: 120_000 });
  }

  createSandbox(spec: unknown, idempotencyKey?: string): Promise<Sandbox> {
    return this.request('/v1/sandboxes', SandboxSchema, {
      method: 'POST',
      body: spec,
      ...(idempotencyKey === undefined ? {} : { headers: { 'idempotency-key': idempotencyKey } }),
      timeoutMs: CREATE_TIMEOUT_MS,
    });
  }

  getSandbox(sandboxId: string): Promise<Sandbox> {
    return this.request(`/v1/sandboxes/${encodeURIComponent(sandboxId)}`, SandboxSchema);
  }

  listSandboxes(query: { state?: string; cursor?: string; limit?: number }): Promise<SandboxPage> {
    const params = new URLSearchParams();
    if (query.state !== undefined) params.set('state', query.state);
    if (query.cursor !== undefined) params.set('cursor', query.cursor);
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    const qs = params.toString();
    return this.request(`/v1/sandboxes${qs === '' ? '' : `?${qs}`}`, SandboxPageSchema);
  }

  exec(sandboxId: string, request: ExecRequest): Promise<ExecResult> {
    return this.request(`/v1/sandboxes/${encodeURIComponent(sandboxId)}/exec`, ExecResultSchema, { method: 'POST', body: request, timeoutMs: EXEC_TIMEOUT_MS });
  }

  writeFile(sandboxId: string, path: string, bytes: Uint8Array, mode?: number): Promise<FileWritten> {
    const query = new URLSearchParams({ path });
    if (mode !== undefined) query.set('mode', mode.toString(8).padStart(4, '0'));
    return this.request(`/v1/sandboxes/${encodeURIComponent(sandboxId)}/files?${query.toString()}`, FileWrittenSchema, { method: 'PUT', bytes, timeoutMs: CREATE_TIMEOUT_MS });
  }

  async readFile(sandboxId: string, path: string): Promise<FileRead> {
    const response = await this.send(`/v1/sandboxes/${encodeURIComponent(sandboxId)}/files?${new URLSearchParams({ path }).toString()}`, {
      headers: { accept: 'application/octet-stream' },
      timeoutMs: CREATE_TIMEOUT_MS,
    });
    const bytes = new Uint8Array(await response.arrayBuffer());
    const seq = Number(response.headers.get('x-cairn-seq'));
    return { bytes, sha256: response.headers.get('x-cairn-sha256'), seq: Number.isInteger(seq) && seq > 0 ? seq : null };
  }

  destroySandbox(sandboxId: string): Promise<Sandbox> {
    return this.request(`/v1/sandboxes/${encodeURIComponent(sandboxId)}`, SandboxSchema, { method: 'DELETE', timeoutMs: CREATE_TIMEOUT_MS });
  }

  sandboxBundle(sandboxId: string): Promise<Bundle> {
    return this.request(`/v1/sandboxes/${encodeURIComponent(sandboxId)}/bundle`, BundleSchema, { timeoutMs: 120_000 });
  }
}
