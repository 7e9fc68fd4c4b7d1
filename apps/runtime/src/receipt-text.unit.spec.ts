import { EVENT_BODY_SCHEMAS } from '@cairn/contracts';
import { canonicalJson } from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import { secretAlertFields } from './output-redaction.js';
import { boundedText } from './receipt-text.js';

describe('boundedText', () => {
  it('keeps short text as it is, drops NUL, and cuts at the bound', () => {
    expect(boundedText('plain', 10)).toBe('plain');
    expect(boundedText('a\u0000b', 10)).toBe('ab');
    expect(boundedText('abcdef', 4)).toBe('abcd');
  });

  it('never leaves a lone surrogate: a pair at the cut goes whole, a lone one becomes U+FFFD', () => {
    expect(boundedText('abc\u{1F600}', 4)).toBe('abc');
    expect(boundedText('ab\u{1F600}', 4)).toBe('ab\u{1F600}');
    expect(boundedText('a\uDC00b', 10)).toBe('a\uFFFDb');
    for (let max = 1; max < 12; max++) expect(boundedText('\u{1F600}'.repeat(6), max).isWellFormed()).toBe(true);
  });
});

describe('the critical alert of a secret seen in files the workload named', () => {
  it('stays canonicalisable however its paths fall at the 2048-character cut', () => {
    const path = `/out/${'\u{1F600}'.repeat(300)}`;
    for (let shift = 0; shift < 2; shift++) {
      const redactions = Array.from({ length: 8 }, (_, i) => ({ stream: 'file' as const, path: `${i === 0 ? 'x'.repeat(shift) : ''}${path}${i}`, pattern: 'secret.plain', secret: 'TOKEN', count: 1 }));
      const fields = secretAlertFields(redactions, 'the collected outputs');
      expect(fields.message.length).toBeLessThanOrEqual(2048);
      const body = { v: 1, seq: 9, run_id: 'run_unit1', tenant: 'acme', type: 'alert.raised', actor: 'runtime', ts: '2026-11-30T00:00:00.000Z', causation: 'run_unit1:4', ...fields };
      expect(() => canonicalJson(EVENT_BODY_SCHEMAS['alert.raised'].parse(body) as object)).not.toThrow();
    }
  });
});
