import { API_ROUTES, CairnError, ErrorBodySchema, isCairnError } from '@cairn/contracts';
import type { ApiRoute, ApiRouteName } from '@cairn/contracts';
import type { z } from 'zod';
import { conform } from './conform.js';
import type { Validation } from './conform.js';

/*
 * One request to the Cairn REST API: the route from the contracts' route table, the key as
 * `Authorization: Bearer`, a timeout, and every answer that is not a success turned into a
 * CairnError carrying the gateway's `{ code, message, details }` (and `details.status`). No
 * gateway answering at all is E_UNAVAILABLE. Browser-safe: fetch, AbortSignal, TextDecoder.
 */

/** The key sent with each request: fixed, or read afresh each time (a page that signs in and out). */
export type ApiKeySource = string | null | (() => string | null);

export interface CairnOptions {
  /** The gateway, e.g. `http://127.0.0.1:7420`; `''` for the page's own origin. */
  url: string;
  /** The API key (`cairn_<prefix>_<secret>`); null sends none (public routes only). */
  apiKey: ApiKeySource;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
  /** Milliseconds a request may take (default 30 s); streams and execs have none. */
  timeoutMs?: number;
  /**
   * How often a request refused with a Retry-After — 429 E_RATE_LIMITED, or a 503 that says when to
   * come back (capacity) — is sent again after waiting that long (default 2; 0: never). A 503 is
   * retried only for a request that is safe to repeat (GET, PUT, DELETE, or one with an Idempotency-Key).
   */
  retries?: number;
  /** The longest Retry-After waited for; a longer one is thrown at once (default 30 s). */
  maxRetryDelayMs?: number;
  /**
   * `tolerant` (default): fields of an answer the contracts do not know (a newer gateway's) are
   * dropped; `strict`: they are an error (a test that client and server agree).
   */
  validation?: Validation;
  /**
   * Check every byte read back (outputs, files) against the sha256 the gateway recorded, here with
   * WebCrypto (default true). A page without WebCrypto (plain HTTP off localhost) may turn it off.
   */
  checkHashes?: boolean;
  /** Called with each error answer before it is thrown (a page signs out on E_UNAUTHORIZED). */
  onError?: (error: CairnError) => void;
  /** Passed to every fetch (a page: `credentials: 'omit'`, `cache: 'no-store'`). */
  requestInit?: Pick<RequestInit, 'credentials' | 'cache' | 'mode' | 'referrerPolicy'>;
  /** Added to the message when no gateway answers (the CLI says how to start one). */
  unreachableHint?: string;
}

type Method = ApiRoute['method'];
type QueryValue = string | number | boolean | readonly string[] | undefined;

export interface RequestOptions {
  query?: Readonly<Record<string, QueryValue>>;
  /** A JSON body. */
  json?: unknown;
  /** A text/plain body (a secret's value), sent as it is. */
  text?: Uint8Array | string;
  /** An application/octet-stream body (a sandbox file). */
  bytes?: Uint8Array;
  headers?: Readonly<Record<string, string>>;
  accept?: string;
  /** null: no timeout (streams, execs). */
  timeoutMs?: number | null;
  signal?: AbortSignal;
}

/**
 * The HTTP status a gateway answered an error with (`details.status` of the CairnError the client
 * threw); undefined for an error no gateway answered (E_UNAVAILABLE, E_INPUT before sending).
 */
export function statusOf(error: unknown): number | undefined {
  if (!isCairnError(error)) return undefined;
  const status = error.details?.status;
  return typeof status === 'number' ? status : undefined;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_RETRIES = 2;
const DEFAULT_MAX_RETRY_DELAY_MS = 30_000;

/** `/v1/runs/:id` with `{ id }` → `/v1/runs/run_x`; a trailing `*` takes `path` (`/out/a b` → `out/a%20b`). */
export function routePath(route: Pick<ApiRoute, 'path'>, params: Readonly<Record<string, string | number>> = {}): string {
  let path = route.path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, (_match, name: string) => {
    const value = params[name];
    if (value === undefined) throw new CairnError('E_INPUT', `${route.path} needs ${name}`);
    return encodeURIComponent(String(value));
  });
  if (path.endsWith('/*')) {
    const rest = params.path;
    if (rest === undefined) throw new CairnError('E_INPUT', `${route.path} needs path`);
    path = `${path.slice(0, -1)}${String(rest).replace(/^\/+/, '').split('/').map(encodeURIComponent).join('/')}`;
  }
  return path;
}

function queryString(query: Readonly<Record<string, QueryValue>> | undefined): string {
  if (query === undefined) return '';
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const item of value as readonly string[]) search.append(name, item);
    else search.set(name, String(value));
  }
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}

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

/** A URL as it may be shown: no userinfo. */
function shownUrl(url: string): string {
  return url.replace(/^([a-z]+:\/\/)[^/@]*@/i, '$1');
}

function retryAfterMs(response: Response): number | null {
  const header = response.headers.get('retry-after');
  if (header === null) return null;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason as Error);
      return;
    }
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener('abort', abort);
      resolve();
    }
    function abort() {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    }
    signal?.addEventListener('abort', abort, { once: true });
  });
}

export class Transport {
  readonly baseUrl: string;
  readonly validation: Validation;
  readonly checkHashes: boolean;
  private readonly fetcher: typeof fetch;

  constructor(private readonly options: CairnOptions) {
    this.baseUrl = options.url.replace(/\/+$/, '');
    this.validation = options.validation ?? 'tolerant';
    this.checkHashes = options.checkHashes ?? true;
    const given = options.fetch;
    // Called unbound: a browser's fetch refuses any `this` but the window.
    this.fetcher = given === undefined ? (input, init) => fetch(input, init) : given;
  }

  private apiKey(): string | null {
    const key = this.options.apiKey;
    return typeof key === 'function' ? key() : key;
  }

  /** A gateway's error answer as a CairnError; anything else as E_INTERNAL naming the status. */
  async failure(response: Response, what: string): Promise<CairnError> {
    const text = await response.text().catch(() => '');
    let body: unknown = undefined;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      // not JSON: reported by its status below
    }
    const parsed = ErrorBodySchema.safeParse(body);
    const error = parsed.success
      ? new CairnError(parsed.data.code, parsed.data.message, { ...parsed.data.details, status: response.status })
      : new CairnError('E_INTERNAL', `${what}: the gateway answered HTTP ${response.status}${text === '' ? '' : `: ${text.slice(0, 200)}`}`, { status: response.status });
    this.options.onError?.(error);
    return error;
  }

  /**
   * Sends one request (again after a Retry-After, as `retries` allows) and answers the response
   * when it is a success; throws the gateway's error otherwise. The body is the caller's to read.
   */
  async send(method: Method, path: string, options: RequestOptions = {}): Promise<Response> {
    const url = `${this.baseUrl}${path}${queryString(options.query)}`;
    const what = `${method} ${path}`;
    const headers: Record<string, string> = { accept: options.accept ?? 'application/json', ...options.headers };
    const key = this.apiKey();
    if (key !== null) headers.authorization = `Bearer ${key}`;
    let body: string | Uint8Array | undefined;
    if (options.bytes !== undefined) {
      headers['content-type'] = 'application/octet-stream';
      body = options.bytes;
    } else if (options.text !== undefined) {
      headers['content-type'] = 'text/plain; charset=utf-8';
      body = options.text;
    } else if (options.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.json);
    }
    const repeatable = method !== 'POST' || Object.keys(headers).some((name) => name.toLowerCase() === 'idempotency-key');
    const retries = this.options.retries ?? DEFAULT_RETRIES;
    const maxDelay = this.options.maxRetryDelayMs ?? DEFAULT_MAX_RETRY_DELAY_MS;
    for (let attempt = 0; ; attempt += 1) {
      const timeoutMs = options.timeoutMs === undefined ? (this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS) : options.timeoutMs;
      const signals = [timeoutMs === null ? undefined : AbortSignal.timeout(timeoutMs), options.signal].filter((s): s is AbortSignal => s !== undefined);
      let response: Response;
      try {
        response = await this.fetcher(url, {
          ...this.options.requestInit,
          method,
          headers,
          ...(body === undefined ? {} : { body: body as NonNullable<RequestInit['body']> }),
          ...(signals.length === 0 ? {} : { signal: signals.length === 1 ? signals[0] : AbortSignal.any(signals) }),
        });
      } catch (error) {
        // The caller's own abort is theirs to recognise.
        if (options.signal?.aborted === true) throw error;
        const hint = this.options.unreachableHint === undefined ? '' : `; ${this.options.unreachableHint}`;
        const shown = shownUrl(this.baseUrl === '' ? 'this page' : this.baseUrl);
        throw new CairnError('E_UNAVAILABLE', `cannot reach the Cairn gateway at ${shown}: ${causeOf(error)}${hint}`, { url: shown });
      }
      if (response.ok) return response;
      const wait = retryAfterMs(response);
      const retryable = wait !== null && (response.status === 429 || (response.status === 503 && repeatable));
      if (!retryable || attempt >= retries || wait > maxDelay) throw await this.failure(response, what);
      await response.body?.cancel().catch(() => undefined);
      await sleep(wait, options.signal);
    }
  }

  /** One JSON request to a route of the table, its answer checked against `schema`. */
  async json<S extends z.ZodType>(method: Method, path: string, schema: S, options: RequestOptions = {}): Promise<z.infer<S>> {
    const what = `${method} ${path}`;
    const response = await this.send(method, path, options);
    let body: unknown;
    try {
      body = await response.json();
    } catch (error) {
      if (isCairnError(error)) throw error;
      if (options.signal?.aborted === true) throw error;
      throw new CairnError('E_INTERNAL', `${what}: the gateway's answer is not JSON`);
    }
    return conform(schema, body, this.validation, what);
  }
}

/** A route of the table by name, with its method and path filled in. */
export function route(name: ApiRouteName, params?: Readonly<Record<string, string | number>>): { method: Method; path: string } {
  const entry: ApiRoute = API_ROUTES[name];
  return { method: entry.method, path: routePath(entry, params) };
}
