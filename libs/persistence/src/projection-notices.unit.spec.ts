import { describe, expect, it } from 'vitest';
import { parseProjectionNotice, projectionNoticePayloads } from './projection-notices.js';

describe('projection notice payloads', () => {
  it('round-trip chain heads, split under the NOTIFY limit', () => {
    const heads = new Map(Array.from({ length: 500 }, (_, i) => [`run_${'x'.repeat(40)}${i}`, i + 1] as const));
    const payloads = projectionNoticePayloads(heads);
    expect(payloads.length).toBeGreaterThan(1);
    for (const payload of payloads) expect(payload.length).toBeLessThanOrEqual(7000);
    expect(new Map(payloads.flatMap(parseProjectionNotice))).toEqual(heads);
  });

  it('leave out what does not parse', () => {
    expect(parseProjectionNotice('run_a:3,garbage,sbx_b:0,sbx_c:x,run_d:12')).toEqual([
      ['run_a', 3],
      ['run_d', 12],
    ]);
    expect(projectionNoticePayloads(new Map())).toEqual([]);
  });
});
