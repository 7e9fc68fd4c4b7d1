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

export class CairnRestClient implements CairnRuns {
  private readonly baseUrl: string;

  constructor(
    url: string,
    private readonly apiKey: string,
  ) {
    this.baseUrl = url.replace(/\/+$/, '');
  }

  private async request<S extends z.ZodType>(path: string, schema: S, init: { method?: 'GET' | 'POST'; body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<z.infer<S>> {
    const method = init.method ?? 'GET';
    const headers: Record<string, string> = { accept: 'application/json', authorization: `Bearer ${this.apiKey}`, ...init.headers };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers,
        ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
        signal: AbortSignal.timeout(init.timeoutMs ?? REQUEST_TIMEOUT_MS),
      });
    } catch (error) {
      const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : error instanceof Error ? error.message : String(error);
      throw new CairnError('E_UNAVAILABLE', `cannot reach the Cairn REST gateway at ${this.baseUrl}: ${cause}`);
    }
    const text = await response.text().catch(() => '');
    let body: unknown = undefined;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      // not JSON: judged below
    }
    if (!response.ok) {
      const failure = ErrorResponseSchema.safeParse(body);
      if (failure.success) throw new CairnError(failure.data.code, failure.data.message, failure.data.details);
      throw new CairnError('E_INTERNAL', `${method} ${path}: the Cairn REST gateway answered HTTP ${response.status}`, { status: response.status });
    }
    const parsed = schema.safeParse(body);
    if (!parsed.success) throw new CairnError('E_INTERNAL', `${method} ${path}: the Cairn REST gateway's answer does not match the REST contract`);
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
}
