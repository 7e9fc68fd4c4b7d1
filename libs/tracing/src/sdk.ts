import type { TracingConfig } from '@cairn/config';
import type { TextMapPropagator } from '@opentelemetry/api';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { startNodeSdk } from '@opentelemetry/sdk-node';
import { createRequire } from 'node:module';

/**
 * The SDK as Cairn runs it: W3C trace context only, spans for every HTTP request (served and made,
 * `fetch` included) and every PostgreSQL query, exported as `OTEL_*` says (OTLP over HTTP). Loaded
 * only when tracing is on.
 */
export function startSdk(service: string, config: TracingConfig, propagator: TextMapPropagator): { shutdown(): Promise<void> } {
  const sdk = startNodeSdk({
    propagators: [propagator],
    // `OTEL_SERVICE_NAME` names a process started alone; `cairn up` leaves it unset so each names itself.
    resourceAttributes: config.OTEL_SERVICE_NAME === undefined ? { 'service.name': service } : {},
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new HttpInstrumentation({ requireParentforOutgoingSpans: true }),
      new PgInstrumentation({ requireParentSpan: true }),
      new UndiciInstrumentation({ requireParentforSpans: true }),
    ],
  });
  // `pg` is CommonJS: loading it here, after the hook is in, patches the one copy every importer shares.
  try {
    createRequire(import.meta.url)('pg');
  } catch {
    // A process without pg installed has no queries to trace.
  }
  return sdk;
}
