export {
  activeTraceHeaders,
  activeTraceId,
  activeTraceIds,
  injectTraceHeaders,
  exitWithTraces,
  inSpan,
  markSpanFailed,
  nameServerSpan,
  nameServerSpanHook,
  parentFromHeaders,
  SHUTDOWN_FLUSH_MS,
  shutdownTracing,
  startTracing,
  tracingActive,
} from './tracing.js';
export type { RoutedRequest, SpanOptions, TracingHandle } from './tracing.js';
export { contextFromHeaders, MAX_TRACESTATE_LENGTH, TRACE_HEADERS, traceHeadersOf, traceIdOf, traceparentOf } from './trace-headers.js';
export type { HeaderSource } from './trace-headers.js';
