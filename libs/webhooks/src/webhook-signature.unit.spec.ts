import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { newWebhookSecret, signatureHeader, verifySignatureHeader } from './webhook-signature.js';

const secret = 'whsec_test-secret-0123456789';
const body = '{"id":"run_a:1","type":"run.submitted"}';

describe('webhook signatures', () => {
  it('is t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>', () => {
    const expected = createHmac('sha256', secret).update(`1700000000.${body}`).digest('hex');
    expect(signatureHeader(secret, 1_700_000_000, body)).toBe(`t=1700000000,v1=${expected}`);
  });

  it('verifies what it signed, within the tolerance', () => {
    const header = signatureHeader(secret, 1_700_000_000, body);
    expect(verifySignatureHeader(secret, header, body, { nowSeconds: 1_700_000_100 })).toEqual({ ok: true, timestamp: 1_700_000_000 });
    expect(verifySignatureHeader(secret, header, Buffer.from(body), { nowSeconds: 1_700_000_000 })).toMatchObject({ ok: true });
  });

  it('refuses another body, another secret, another timestamp, a stale one and junk', () => {
    const header = signatureHeader(secret, 1_700_000_000, body);
    const now = { nowSeconds: 1_700_000_000 };
    expect(verifySignatureHeader(secret, header, `${body} `, now)).toEqual({ ok: false, reason: 'mismatch' });
    expect(verifySignatureHeader('whsec_other', header, body, now)).toEqual({ ok: false, reason: 'mismatch' });
    expect(verifySignatureHeader(secret, header.replace('t=1700000000', 't=1700000001'), body, now)).toEqual({ ok: false, reason: 'mismatch' });
    expect(verifySignatureHeader(secret, header, body, { nowSeconds: 1_700_000_301 })).toEqual({ ok: false, reason: 'stale' });
    for (const junk of ['', 'v1=abc', 't=1', 't=x,v1=00', `${header},t=1`, 'garbage']) {
      expect(verifySignatureHeader(secret, junk, body, now)).toMatchObject({ ok: false, reason: 'malformed' });
    }
  });

  it('accepts a header carrying several v1 signatures when one matches (rotation)', () => {
    const good = signatureHeader(secret, 1_700_000_000, body);
    const header = `t=1700000000,v1=${'0'.repeat(64)},${good.split(',')[1]!}`;
    expect(verifySignatureHeader(secret, header, body, { nowSeconds: 1_700_000_000 })).toMatchObject({ ok: true });
  });

  it('makes fresh 256-bit secrets', () => {
    const a = newWebhookSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(newWebhookSecret()).not.toBe(a);
  });
});
