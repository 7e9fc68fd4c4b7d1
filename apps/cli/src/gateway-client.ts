import { CairnError, ErrorCodeSchema, isCairnError } from '@cairn/contracts';
import { redactUrl } from '@cairn/config';
import { z } from 'zod';

/*
 * The CLI's side of the REST contract (base `<url>/v1`, Bearer key, camelCase JSON, errors as
 * `{ code, message, details }`). Every failure becomes a CairnError with the server's code, or
 * E_UNAVAILABLE when no gateway answers.
 */

export const RunSchema = z.object({
  runId: z.string(),
  tenant: z.string(),
  name: z.string().nullable(),
  state: z.string(),
  errorCode: z.string().nullable(),
  verdict: z.string().nullable(),
  score: z.number().nullable(),
  maxScore: z.number().nullable(),
  upperBound: z.number().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
  eventCount: z.number(),
  headHash: z.string().nullable(),
  sealed: z.boolean(),
});
export type Run = z.infer<typeof RunSchema>;

export const SubmittedSchema = z.object({ runId: z.string(), state: z.string(), duplicate: z.boolean() });
export type Submitted = z.infer<typeof SubmittedSchema>;

export const RunPageSchema = z.object({ items: z.array(RunSchema), nextCursor: z.string().nullable() });
export type RunPage = z.infer<typeof RunPageSchema>;

/** A receipt exactly as stored: snake_case body plus `prev_hash`/`hash`. */
export const ReceiptSchema = z.looseObject({ seq: z.number().int().min(1), type: z.string(), run_id: z.string(), hash: z.string() });
export type Receipt = z.infer<typeof ReceiptSchema>;

export const EventPageSchema = z.object({ items: z.array(ReceiptSchema), nextAfter: z.number().nullable() });
export type EventPage = z.infer<typeof EventPageSchema>;

export const BundleSchema = z.looseObject({
  format: z.string(),
  runId: z.string(),
  receipts: z.array(z.unknown()),
  artifacts: z.record(z.string(), z.string()),
  verdict: z.string().nullable(),
  grade: z.object({ score: z.number(), maxScore: z.number(), upperBound: z.number() }).nullable(),
  headHash: z.string().nullable(),
});
export type Bundle = z.infer<typeof BundleSchema>;

export const CancelledSchema = z.object({ runId: z.string(), state: z.string() });

export const HealthSchema = z.object({
  status: z.enum(['ok', 'degraded']),
  checks: z.looseObject({ services: z.record(z.string(), z.string()).optional() }),
});
export type Health = z.infer<typeof HealthSchema>;

export const WorkersSchema = z.object({ items: z.array(z.looseObject({ workerId: z.string() })) });

/** Where a chain's resources live: a run's under /v1/runs, a sandbox session's under /v1/sandboxes, a tenant's admin chain (`adm_<tenant>`) under /v1/tenants/<tenant>. */
export function chainPath(chainId: string): string {
  if (chainId.startsWith('adm_')) return `/v1/tenants/${encodeURIComponent(chainId.slice('adm_'.length))}`;
  return `/v1/${chainId.startsWith('sbx_') ? 'sandboxes' : 'runs'}/${encodeURIComponent(chainId)}`;
}

const START_HINT = 'start the stack with `npx --no-install cairn up` (or set CAIRN_URL and CAIRN_API_KEY)';
const REQUEST_TIMEOUT_MS = 30_000;

function causeOf(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause;
    if (cause instanceof Error) {
      const code = 'code' in cause && typeof cause.code === 'string' ? cause.code : '';
      return code === '' ? cause.message : `${code}: ${cause.message}`;
    }
    return error.message;
  }
  return String(error);
}

export interface RequestOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'DELETE';
  body?: unknown;
  /** Sent as it is, `text/plain` (a secret's value), instead of a JSON `body`. */
  text?: Uint8Array;
  /** Sent as it is, `application/octet-stream` (a file for a sandbox), instead of a JSON `body`. */
  bytes?: Uint8Array;
  headers?: Record<string, string>;
  /** Default 30 s; null for none (streams). */
  timeoutMs?: number | null;
  signal?: AbortSignal;
}

export class GatewayClient {
  readonly baseUrl: string;

  constructor(
    url: string,
    private readonly apiKey: string | null,
  ) {
    this.baseUrl = url.replace(/\/+$/, '');
  }

  /** A gateway error body as a CairnError; anything else as E_INTERNAL naming the status. */
  async failure(response: Response, what: string): Promise<CairnError> {
    const text = await response.text().catch(() => '');
    let body: unknown = undefined;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: reported by status below
    }
    const parsed = z.object({ code: ErrorCodeSchema, message: z.string(), details: z.record(z.string(), z.unknown()).optional() }).safeParse(body);
    if (parsed.success) return new CairnError(parsed.data.code, parsed.data.message, { ...parsed.data.details, status: response.status });
    return new CairnError('E_INTERNAL', `${what}: the gateway answered HTTP ${response.status}${text === '' ? '' : `: ${text.slice(0, 200)}`}`, { status: response.status });
  }

  async fetch(path: string, options: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
    if (this.apiKey !== null) headers.authorization = `Bearer ${this.apiKey}`;
    let body: string | Uint8Array | undefined;
    if (options.text !== undefined) {
      headers['content-type'] = 'text/plain; charset=utf-8';
      body = options.text;
    } else if (options.bytes !== undefined) {
      headers['content-type'] = 'application/octet-stream';
      body = options.bytes;
    } else if (options.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.body);
    }
    const timeout = options.timeoutMs === null ? undefined : AbortSignal.timeout(options.timeoutMs ?? REQUEST_TIMEOUT_MS);
    const signals = [timeout, options.signal].filter((s): s is AbortSignal => s !== undefined);
    try {
      return await fetch(`${this.baseUrl}${path}`, {
        method: options.method ?? 'GET',
        headers,
        ...(body === undefined ? {} : { body }),
        ...(signals.length === 0 ? {} : { signal: AbortSignal.any(signals) }),
      });
    } catch (error) {
      if (options.signal?.aborted === true) throw error;
      throw new CairnError('E_UNAVAILABLE', `cannot reach the Cairn gateway at ${redactUrl(this.baseUrl)}: ${causeOf(error)}; ${START_HINT}`, {
        url: redactUrl(this.baseUrl),
      });
    }
  }

  /** One JSON request, its answer checked against `schema`. */
  async json<S extends z.ZodType>(path: string, schema: S, options: RequestOptions = {}): Promise<z.infer<S>> {
    const what = `${options.method ?? 'GET'} ${path}`;
    const response = await this.fetch(path, options);
    if (!response.ok) throw await this.failure(response, what);
    let body: unknown;
    try {
      body = await response.json();
    } catch (error) {
      if (isCairnError(error)) throw error;
      throw new CairnError('E_INTERNAL', `${what}: the gateway's answer is not JSON`);
    }
    const parsed = schema.safeParse(body);
    if (!parsed.success) throw new CairnError('E_INTERNAL', `${what}: the gateway's answer does not match the REST contract: ${parsed.error.issues[0]?.message ?? ''}`);
    return parsed.data;
  }

  health(): Promise<Health> {
    return this.json('/v1/health', HealthSchema, { timeoutMs: 5_000 });
  }

  submitRun(spec: unknown, idempotencyKey: string): Promise<Submitted> {
    return this.json('/v1/runs', SubmittedSchema, { method: 'POST', body: spec, headers: { 'idempotency-key': idempotencyKey } });
  }

  getRun(runId: string): Promise<Run> {
    return this.json(`/v1/runs/${encodeURIComponent(runId)}`, RunSchema);
  }

  listRuns(query: { limit?: number; cursor?: string; state?: string } = {}): Promise<RunPage> {
    const params = new URLSearchParams();
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    if (query.cursor !== undefined) params.set('cursor', query.cursor);
    if (query.state !== undefined) params.set('state', query.state);
    const qs = params.toString();
    return this.json(`/v1/runs${qs === '' ? '' : `?${qs}`}`, RunPageSchema);
  }

  /** A chain's receipts after `after`: a run's (`run_…`) or a sandbox session's (`sbx_…`). */
  events(runId: string, after: number, limit?: number): Promise<EventPage> {
    const params = new URLSearchParams({ after: String(after) });
    if (limit !== undefined) params.set('limit', String(limit));
    return this.json(`${chainPath(runId)}/events?${params.toString()}`, EventPageSchema);
  }

  /** The proof bundle of a chain: a run's (`run_…`) or a sandbox session's (`sbx_…`). */
  bundle(chainId: string): Promise<Bundle> {
    return this.json(`${chainPath(chainId)}/bundle`, BundleSchema, { timeoutMs: 120_000 });
  }

  cancel(runId: string): Promise<z.infer<typeof CancelledSchema>> {
    return this.json(`/v1/runs/${encodeURIComponent(runId)}/cancel`, CancelledSchema, { method: 'POST' });
  }

  /**
   * One SSE connection to the run's receipts after `after`: yields each receipt as it comes and
   * returns when the server closes the stream (it does after `run.sealed`).
   */
  async *streamOnce(runId: string, after: number, signal?: AbortSignal): AsyncGenerator<Receipt> {
    const path = `${chainPath(runId)}/events/stream?after=${after}`;
    const response = await this.fetch(path, {
      headers: { accept: 'text/event-stream', 'last-event-id': `${runId}:${after}` },
      timeoutMs: null,
      ...(signal === undefined ? {} : { signal }),
    });
    if (!response.ok) throw await this.failure(response, `GET ${path}`);
    if (response.body === null) return;
    for await (const event of parseSse(response.body)) {
      if (event.event !== 'receipt') continue;
      let data: unknown;
      try {
        data = JSON.parse(event.data);
      } catch {
        throw new CairnError('E_INTERNAL', `the event stream of ${runId} carried data that is not JSON`);
      }
      const receipt = ReceiptSchema.safeParse(data);
      if (!receipt.success) throw new CairnError('E_INTERNAL', `the event stream of ${runId} carried something that is not a receipt`);
      yield receipt.data;
    }
  }

  /**
   * Every receipt of the run after `after`, in order, until `run.sealed`: reconnects (resuming
   * after the last seq seen) when the stream drops, and gives up only when the gateway stays
   * unreachable for `patienceMs`.
   */
  async *follow(runId: string, after = 0, options: { signal?: AbortSignal; patienceMs?: number } = {}): AsyncGenerator<Receipt> {
    let last = after;
    let failingSince: number | null = null;
    const patience = options.patienceMs ?? 30_000;
    for (;;) {
      try {
        for await (const receipt of this.streamOnce(runId, last, options.signal)) {
          failingSince = null;
          if (receipt.seq <= last) continue;
          last = receipt.seq;
          yield receipt;
          if (receipt.type === 'run.sealed') return;
        }
        failingSince = null;
      } catch (error) {
        if (options.signal?.aborted === true) return;
        if (!isCairnError(error) || error.code !== 'E_UNAVAILABLE') throw error;
        failingSince ??= Date.now();
        if (Date.now() - failingSince > patience) throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/** Server-sent events from a byte stream (comments and unknown fields ignored). */
export async function* parseSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let id: string | null = null;
  let event = 'message';
  let data: string[] = [];
  const lineOf = (line: string): SseEvent | null => {
    if (line === '') {
      const out = data.length === 0 ? null : { id, event, data: data.join('\n') };
      event = 'message';
      data = [];
      return out;
    }
    if (line.startsWith(':')) return null;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id') id = value;
    return null;
  };
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
      // A lone \r at the end may be the first half of \r\n: wait for the next chunk.
      if (newline === buffer.length - 1 && buffer.endsWith('\r')) break;
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
      const out = lineOf(line);
      if (out !== null) yield out;
    }
  }
  // An event the stream ended in the middle of is not dispatched (as the SSE spec says).
}
