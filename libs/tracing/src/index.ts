export {
  activeTraceHeaders,
  activeTraceId,
  activeTraceIds,
  injectTraceHeaders,
  inSpan,
  markSpanFailed,
  parentFromHeaders,
  shutdownTracing,
  startTracing,
  tracingActive,
} from './tracing.js';
export type { SpanOptions, TracingHandle } from './tracing.js';
export { contextFromHeaders, MAX_TRACESTATE_LENGTH, TRACE_HEADERS, traceHeadersOf, traceIdOf, traceparentOf } from './trace-headers.js';
export type { HeaderSource } from './trace-headers.js';
