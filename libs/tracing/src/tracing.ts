import { loadConfig, TracingConfigSchema, tracingEnabled } from '@cairn/config';
import type { TracingConfig } from '@cairn/config';
import { context, isSpanContextValid, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Attributes, Context, Span } from '@opentelemetry/api';
import { getRPCMetadata, RPCType, W3CTraceContextPropagator } from '@opentelemetry/core';
import { contextFromHeaders, traceHeadersOf } from './trace-headers.js';
import type { HeaderSource } from './trace-headers.js';

/** What `startTracing` leaves running: flush and stop it before the process exits. */
export interface TracingHandle {
  readonly enabled: boolean;
  shutdown(): Promise<void>;
}

interface Started {
  shutdown(): Promise<void>;
}

let started: Started | null = null;
const propagator = new W3CTraceContextPropagator();

/**
 * Starts the OpenTelemetry SDK for this process when the `OTEL_*` variables name an exporter (ADR
 * 0031); otherwise does nothing at all — no SDK is loaded, no header is added, no span is made.
 * Malformed variables stop the process at boot (`E_INPUT` naming them). Call it first in `main.ts`,
 * before the modules it instruments (`pg`, `http`) are loaded: import the rest after it.
 */
export async function startTracing(service: string, env: NodeJS.ProcessEnv = process.env): Promise<TracingHandle> {
  const config: TracingConfig = loadConfig(TracingConfigSchema, env);
  if (started !== null || !tracingEnabled(config)) return { enabled: started !== null, shutdown: shutdownTracing };
  // Loaded only when on: the SDK and its exporters are many modules a process without tracing never pays for.
  const { startSdk } = await import('./sdk.js');
  started = startSdk(service, config, propagator);
  return { enabled: true, shutdown: shutdownTracing };
}

/**
 * How long an exit waits for the exporter (ADR 0031): spans it has not sent by then are lost, the exit
 * is not held up — a collector that is down or slow never keeps a service from stopping.
 */
export const SHUTDOWN_FLUSH_MS = 3_000;

let stopping: Promise<void> | null = null;

/**
 * Flushes what is still buffered and stops the SDK, for at most `SHUTDOWN_FLUSH_MS`; nothing when
 * tracing is off. Never rejects. Callers racing it (a signal, a fatal error) all wait for the one flush.
 */
export function shutdownTracing(timeoutMs: number = SHUTDOWN_FLUSH_MS): Promise<void> {
  if (stopping !== null) return stopping;
  const sdk = started;
  if (sdk === null) return Promise.resolve();
  started = null;
  stopping = settleWithin(sdk.shutdown(), timeoutMs).finally(() => {
    stopping = null;
  });
  return stopping;
}

/** Flushes the traces (bounded, `shutdownTracing`), then exits with `code`: a process's every way out. */
export async function exitWithTraces(code: number): Promise<never> {
  await shutdownTracing();
  process.exit(code);
}

/** Resolves when `work` settles or after `ms`, whichever is first; never rejects, leaves no timer behind. */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const elapsed = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  try {
    await Promise.race([work.catch(() => undefined), elapsed]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether this process traces. */
export function tracingActive(): boolean {
  return started !== null;
}

/** `trace_id` and `span_id` of the active span, for log lines; undefined when tracing is off or none is active. */
export function activeTraceIds(): { trace_id: string; span_id: string } | undefined {
  if (started === null) return undefined;
  const span = trace.getActiveSpan();
  if (span === undefined) return undefined;
  const ids = span.spanContext();
  return isSpanContextValid(ids) ? { trace_id: ids.traceId, span_id: ids.spanId } : undefined;
}

/** The headers that continue the active span on the next hop; none when tracing is off. */
export function activeTraceHeaders(): Record<string, string> {
  if (started === null) return {};
  return traceHeadersOf(context.active(), propagator);
}

/** Sets the active span's trace headers on `target` (NATS `MsgHdrs`); nothing when tracing is off. */
export function injectTraceHeaders(target: { set(name: string, value: string): void }): void {
  if (started === null) return;
  for (const [name, value] of Object.entries(traceHeadersOf(context.active(), propagator))) target.set(name, value);
}

/** The context a received message's headers continue (the active one when tracing is off or they carry none). */
export function parentFromHeaders(source: HeaderSource | undefined): Context {
  if (started === null || source === undefined) return context.active();
  return contextFromHeaders(source, propagator, context.active());
}

export interface SpanOptions {
  attributes?: Attributes;
  kind?: 'internal' | 'server' | 'client' | 'producer' | 'consumer';
  /** The span's parent: default the active context. */
  parent?: Context;
}

const KINDS = { internal: SpanKind.INTERNAL, server: SpanKind.SERVER, client: SpanKind.CLIENT, producer: SpanKind.PRODUCER, consumer: SpanKind.CONSUMER } as const;

/**
 * Runs `work` in a span named `name` (active for everything `work` awaits) and ends it when `work`
 * settles; a failure marks it `ERROR` with the error's code. With tracing off it only runs `work`.
 */
export async function inSpan<T>(name: string, options: SpanOptions, work: (span: Span | null) => Promise<T>): Promise<T> {
  if (started === null) return work(null);
  const tracer = trace.getTracer('cairn');
  const parent = options.parent ?? context.active();
  return tracer.startActiveSpan(name, { kind: KINDS[options.kind ?? 'internal'], ...(options.attributes === undefined ? {} : { attributes: options.attributes }) }, parent, async (span) => {
    try {
      return await work(span);
    } catch (error) {
      markSpanFailed(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** Marks `span` failed with the error's code (`E_INTERNAL` for one without); nothing for no span. */
export function markSpanFailed(span: Span | null, error: unknown): void {
  if (span === null) return;
  const code = typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'string' ? (error as { code: string }).code : 'E_INTERNAL';
  span.setAttribute('cairn.error_code', code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: code });
}

/** The trace id of the active span, or null (tracing off, or no span). */
export function activeTraceId(): string | null {
  return activeTraceIds()?.trace_id ?? null;
}

/** What of a served request names its span: Fastify's `request.method` and `request.routeOptions.url`. */
export interface RoutedRequest {
  readonly method: string;
  readonly routeOptions: { readonly url?: string | undefined };
}

/**
 * Names the server span of the HTTP request `ctx` belongs to by its route: `GET /v1/runs/:id` rather
 * than `GET`, with `http.route` set (the `http` instrumentation keeps both when the response ends). A
 * request no route matched keeps its method alone: a span name is never the raw URL. Nothing when `ctx`
 * holds no served request (tracing off, or not inside one).
 */
export function nameServerSpan(ctx: Context, method: string, route: string | undefined): void {
  if (route === undefined || route === '') return;
  const served = getRPCMetadata(ctx);
  if (served?.type !== RPCType.HTTP) return;
  served.route = route;
  served.span.updateName(`${method} ${route}`);
  served.span.setAttribute('http.route', route);
}

/**
 * A Fastify `onRequest` hook (both gateways add it before their routes): names the request's server
 * span `<METHOD> <route template>` (`nameServerSpan`). Nothing when tracing is off.
 */
export function nameServerSpanHook(request: RoutedRequest, _reply: unknown, done: () => void): void {
  if (started !== null) nameServerSpan(context.active(), request.method, request.routeOptions.url);
  done();
}
