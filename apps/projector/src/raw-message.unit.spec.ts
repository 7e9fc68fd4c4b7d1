import type { MsgHdrs } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { rawMessageOf } from './raw-message.js';

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const data = new TextEncoder().encode('{}');
/** Only `get` is read of a delivery's headers. */
const headers = (get: (name: string) => string) => ({ get }) as unknown as MsgHdrs;

describe('rawMessageOf', () => {
  it('carries the stream seq, subject, bytes and traceparent of a delivery', () => {
    const message = rawMessageOf({ seq: 7, subject: 'ev.run_a.run.submitted', data, headers: headers((name) => (name === 'traceparent' ? TRACEPARENT : '')) });
    expect(message).toMatchObject({ streamSeq: 7, subject: 'ev.run_a.run.submitted', data, traceparent: TRACEPARENT });
  });

  it('has no traceparent for a delivery without headers, or without that one', () => {
    expect(rawMessageOf({ seq: 1, subject: 's', data, headers: undefined }).traceparent).toBeNull();
    expect(rawMessageOf({ seq: 1, subject: 's', data, headers: headers(() => '') }).traceparent).toBeNull();
  });

  it('reads the headers only when asked for the traceparent', () => {
    let reads = 0;
    const delivery = {
      seq: 1,
      subject: 's',
      data,
      get headers() {
        reads += 1;
        return undefined;
      },
    };
    const message = rawMessageOf(delivery);
    expect(reads).toBe(0);
    expect(message.traceparent).toBeNull();
    expect(reads).toBe(1);
  });
});
