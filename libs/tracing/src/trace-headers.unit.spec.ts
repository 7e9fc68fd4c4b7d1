import { ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import type { TextMapGetter } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { describe, expect, it } from 'vitest';
import { contextFromHeaders, MAX_TRACESTATE_LENGTH, traceHeadersOf, traceIdOf, traceparentOf } from './trace-headers.js';

const propagator = new W3CTraceContextPropagator();
const recordGetter: TextMapGetter<Record<string, string>> = { get: (carrier, key) => carrier[key], keys: (carrier) => Object.keys(carrier) };
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';

function headers(record: Record<string, string>) {
  return { get: (name: string) => record[name] };
}

describe('trace headers over NATS', () => {
  it('carries a span as a W3C traceparent, and reads it back as the remote parent', () => {
    const ctx = trace.setSpanContext(ROOT_CONTEXT, { traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.SAMPLED });
    const out = traceHeadersOf(ctx, propagator);
    expect(out).toEqual({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-01` });
    const parent = trace.getSpanContext(contextFromHeaders(headers(out), propagator));
    expect(parent).toMatchObject({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.SAMPLED, isRemote: true });
  });

  it('adds nothing for a context without a span', () => {
    expect(traceHeadersOf(ROOT_CONTEXT, propagator)).toEqual({});
  });

  it('carries a short tracestate and drops one that would eat the headers’ room', () => {
    const short = propagator.extract(ROOT_CONTEXT, { traceparent: `00-${TRACE_ID}-${SPAN_ID}-01`, tracestate: 'cairn=1' }, recordGetter);
    expect(traceHeadersOf(short, propagator)).toEqual({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-01`, tracestate: 'cairn=1' });
    const entries = Array.from({ length: 30 }, (_, i) => `k${i}=${'v'.repeat(10)}`).join(',');
    expect(entries.length).toBeGreaterThan(MAX_TRACESTATE_LENGTH);
    const long = propagator.extract(ROOT_CONTEXT, { traceparent: `00-${TRACE_ID}-${SPAN_ID}-01`, tracestate: entries }, recordGetter);
    expect(traceHeadersOf(long, propagator)).toEqual({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-01` });
  });

  it.each([
    ['no headers', undefined],
    ['no traceparent', headers({})],
    ['an empty traceparent', headers({ traceparent: '' })],
    ['a malformed traceparent', headers({ traceparent: 'abc' })],
    ['an all-zero trace id', headers({ traceparent: `00-${'0'.repeat(32)}-${SPAN_ID}-01` })],
    ['an all-zero span id', headers({ traceparent: `00-${TRACE_ID}-${'0'.repeat(16)}-01` })],
    ['a forbidden version', headers({ traceparent: `ff-${TRACE_ID}-${SPAN_ID}-01` })],
    ['upper-case hex', headers({ traceparent: `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01` })],
  ])('starts a new trace from %s', (_name, source) => {
    expect(trace.getSpanContext(contextFromHeaders(source, propagator))).toBeUndefined();
  });
});

describe('traceIdOf', () => {
  it('reads the trace id of a valid traceparent', () => {
    expect(traceIdOf(`00-${TRACE_ID}-${SPAN_ID}-01`)).toBe(TRACE_ID);
    expect(traceIdOf(` 00-${TRACE_ID}-${SPAN_ID}-00 `)).toBe(TRACE_ID);
  });

  it.each([null, undefined, '', 'abc', `ff-${TRACE_ID}-${SPAN_ID}-01`, `00-${'0'.repeat(32)}-${SPAN_ID}-01`, `00-${TRACE_ID}-${'0'.repeat(16)}-01`, `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`])(
    'is null for %j',
    (value) => {
      expect(traceIdOf(value)).toBeNull();
    },
  );
});

describe('traceparentOf', () => {
  it('returns the header as carried', () => {
    expect(traceparentOf(headers({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-01` }))).toBe(`00-${TRACE_ID}-${SPAN_ID}-01`);
    expect(traceparentOf(headers({ traceparent: 'abc' }))).toBe('abc');
  });

  it('is null without headers, without the header, or for the empty string NATS answers a missing one with', () => {
    expect(traceparentOf(undefined)).toBeNull();
    expect(traceparentOf(headers({}))).toBeNull();
    expect(traceparentOf({ get: () => '' })).toBeNull();
    expect(traceparentOf({ get: () => null })).toBeNull();
  });
});
