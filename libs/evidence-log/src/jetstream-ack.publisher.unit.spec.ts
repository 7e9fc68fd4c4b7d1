import { headers } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { parseAck } from './jetstream-ack.publisher.js';

const json = (value: unknown) => ({ data: new TextEncoder().encode(JSON.stringify(value)), headers: undefined });

describe('parseAck', () => {
  it('reads a stored ack, and a duplicate', () => {
    expect(parseAck(json({ stream: 'EV', seq: 7 }))).toEqual({ kind: 'stored', stream: 'EV', seq: 7, duplicate: false });
    expect(parseAck(json({ stream: 'EV', seq: 7, duplicate: true }))).toEqual({ kind: 'stored', stream: 'EV', seq: 7, duplicate: true });
  });

  it('reads a JetStream error with its err_code', () => {
    expect(parseAck(json({ error: { code: 400, err_code: 10071, description: 'wrong last sequence: 3' } }))).toEqual({
      kind: 'rejected',
      errCode: 10071,
      status: 400,
      description: 'wrong last sequence: 3',
    });
  });

  it('reads a 503 status without data as no responders', () => {
    expect(parseAck({ data: new Uint8Array(), headers: headers(503, 'No Responders') })).toEqual({ kind: 'no_responders' });
  });

  it('refuses an ack it cannot read', () => {
    expect(parseAck({ data: new TextEncoder().encode('+OK'), headers: undefined })).toMatchObject({ kind: 'rejected', errCode: 0 });
    expect(parseAck(json({ stream: 'EV' }))).toMatchObject({ kind: 'rejected', errCode: 0 });
    expect(parseAck({ data: new Uint8Array(), headers: undefined })).toMatchObject({ kind: 'rejected' });
  });
});
