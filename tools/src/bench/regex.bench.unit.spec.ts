import { describe, expect, it } from 'vitest';
import { formatRegexBench, runRegexBench } from './regex.bench.js';

describe('the regex bench', () => {
  it('runs every case on all three engines at a small scale, V8 only where it cannot backtrack forever', () => {
    const rows = runRegexBench({ scale: 0.01, rounds: 1 });
    expect(rows.map((row) => row.name)).toHaveLength(7);
    for (const row of rows) {
      expect(row.ours).toBeTypeOf('number');
      expect(row.re2js).toBeTypeOf('number');
      expect(row.native === null).toBe(row.name.startsWith('ReDoS'));
      // These cases avoid the corners where RE2 and JavaScript differ (ADR 0016): all answer alike.
      expect(row.disagreements, row.name).toEqual([]);
    }
  });

  it('prints each case with the three timings and the ratio', () => {
    const text = formatRegexBench([
      { name: 'a case', pattern: 'a', chars: 1000, calls: 2, ours: 3, re2js: 1.5, native: 0.5, disagreements: [] },
      { name: 'ReDoS x', pattern: '(a+)+$', chars: 10, calls: 1, ours: 4, re2js: 2, native: null, disagreements: ['re2js: true'] },
    ]);
    expect(text).toMatch(/a case\s+1000\s+2\s+3\.0 ms\s+1\.5 ms\s+0\.5 ms\s+2\.00×/);
    expect(text).toMatch(/ReDoS x\s+10\s+1\s+4\.0 ms\s+2\.0 ms\s+not run\s+2\.00×\s+answers differ from ours: re2js: true/);
  });
});
