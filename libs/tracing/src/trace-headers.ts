import { ROOT_CONTEXT } from '@opentelemetry/api';
import type { Context, TextMapGetter, TextMapPropagator, TextMapSetter } from '@opentelemetry/api';

/** The W3C trace-context headers a NATS message carries (ADR 0031): never a receipt's body. */
export const TRACE_HEADERS = ['traceparent', 'tracestate'] as const;

/** A `tracestate` longer than this is dropped rather than carried: it would eat the headers' room. */
export const MAX_TRACESTATE_LENGTH = 256;

/** Anything headers can be read from: NATS `MsgHdrs`, a plain record. */
export interface HeaderSource {
  get(name: string): string | undefined | null;
}

const setter: TextMapSetter<Record<string, string>> = {
  set(carrier, key, value) {
    carrier[key] = value;
  },
};

const getter: TextMapGetter<HeaderSource> = {
  keys: () => [...TRACE_HEADERS],
  get(carrier, key) {
    const value = carrier.get(key);
    return value === null || value === undefined || value === '' ? undefined : value;
  },
};

/**
 * The headers that carry `ctx`'s span to the next hop: `traceparent` (and `tracestate` when short),
 * or nothing when `ctx` holds no valid span. Pure: the propagator is given.
 */
export function traceHeadersOf(ctx: Context, propagator: TextMapPropagator): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagator.inject(ctx, carrier, setter);
  const out: Record<string, string> = {};
  if (carrier['traceparent'] !== undefined) out['traceparent'] = carrier['traceparent'];
  const state = carrier['tracestate'];
  if (out['traceparent'] !== undefined && state !== undefined && state.length <= MAX_TRACESTATE_LENGTH) out['tracestate'] = state;
  return out;
}

/** The context a message's headers continue; the root context when they carry none, or a malformed one. */
export function contextFromHeaders(source: HeaderSource | undefined, propagator: TextMapPropagator, base: Context = ROOT_CONTEXT): Context {
  if (source === undefined) return base;
  return propagator.extract(base, source, getter);
}

/**
 * A message's `traceparent` header as it was carried, or null when it has none: NATS answers a
 * missing header with an empty string. Kept raw, so whoever reads the trace id from it
 * (`traceIdOf`) decides what a malformed one means.
 */
export function traceparentOf(source: HeaderSource | undefined): string | null {
  const value = source?.get('traceparent');
  return typeof value === 'string' && value !== '' ? value : null;
}

/** The trace id in a `traceparent` header (lower-case hex), or null when it is absent or malformed. */
export function traceIdOf(traceparent: string | null | undefined): string | null {
  if (typeof traceparent !== 'string') return null;
  const match = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(traceparent.trim());
  if (match === null || match[1] === 'ff') return null;
  const traceId = match[2]!;
  if (/^0+$/.test(traceId) || /^0+$/.test(match[3]!)) return null;
  return traceId;
}
