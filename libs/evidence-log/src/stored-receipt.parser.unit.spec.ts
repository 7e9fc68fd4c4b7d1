import { isCairnError } from '@cairn/contracts';
import { canonicalJson } from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import { GENESIS_HEAD, prepareAppend, sealOnto } from './append-body.builder.js';
import { parseStoredReceipt } from './stored-receipt.parser.js';

const where = { subject: 'cairn.evidence.run_abc', streamSeq: 7 };
const encode = (text: string) => new TextEncoder().encode(text);

function codeOf(fn: () => unknown): string | null {
  try {
    fn();
  } catch (error) {
    return isCairnError(error) ? error.code : 'not a CairnError';
  }
  return null;
}

describe('parseStoredReceipt', () => {
  it('returns the receipt exactly as stored, unknown fields included', () => {
    const { receipt, canonical: text } = sealOnto(
      prepareAppend('run_abc', { type: 'run.submitted', actor: 'intake', tenant: 't1', causation: null, fields: { z_extra: [1, { b: 2 }] } }),
      GENESIS_HEAD,
    );
    expect(text).toBe(canonicalJson(receipt));
    const parsed = parseStoredReceipt(encode(text), where);
    expect(parsed).toEqual(receipt);
    expect(JSON.stringify(parsed)).toBe(text);
  });

  it('calls a message that is not JSON, or not a receipt, a broken chain', () => {
    expect(codeOf(() => parseStoredReceipt(encode('{not json'), where))).toBe('E_CHAIN_BROKEN');
    expect(codeOf(() => parseStoredReceipt(new Uint8Array([0xff, 0xfe]), where))).toBe('E_CHAIN_BROKEN');
    expect(codeOf(() => parseStoredReceipt(encode('{"seq":1}'), where))).toBe('E_CHAIN_BROKEN');
  });
});
