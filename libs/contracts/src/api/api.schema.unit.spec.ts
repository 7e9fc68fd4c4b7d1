import { describe, expect, it } from 'vitest';
import { RunSchema, TraceIdSchema } from './api.schema.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const run = {
  runId: 'run_a',
  tenant: 'default',
  name: null,
  state: 'SEALED',
  errorCode: null,
  verdict: 'SUPPORTS',
  score: 1,
  maxScore: 1,
  upperBound: 1,
  createdAt: '2026-12-03T08:00:00.000Z',
  updatedAt: '2026-12-03T08:00:01.000Z',
  eventCount: 12,
  headHash: 'a'.repeat(64),
  sealed: true,
};

describe('TraceIdSchema', () => {
  it('takes a W3C trace id', () => {
    expect(TraceIdSchema.parse(TRACE_ID)).toBe(TRACE_ID);
  });

  it.each(['', TRACE_ID.toUpperCase(), TRACE_ID.slice(1), `${TRACE_ID}0`, '0'.repeat(32), `00-${TRACE_ID}-00f067aa0ba902b7-01`, 'g'.repeat(32)])('refuses %j', (value) => {
    expect(TraceIdSchema.safeParse(value).success).toBe(false);
  });
});

describe('RunSchema', () => {
  it('takes a run with or without a trace id, and refuses a null or malformed one', () => {
    expect(RunSchema.parse({ ...run, traceId: TRACE_ID }).traceId).toBe(TRACE_ID);
    expect(RunSchema.parse(run)).not.toHaveProperty('traceId');
    expect(RunSchema.safeParse({ ...run, traceId: null }).success).toBe(false);
    expect(RunSchema.safeParse({ ...run, traceId: 'abc' }).success).toBe(false);
  });
});
