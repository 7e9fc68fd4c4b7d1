import { describe, expect, it } from 'vitest';
import { chainIdOfSubject, isCalendarTimestamp, jsonTextProblem, MAX_JSON_DEPTH, mayBeUnstorable } from './receipt-check.js';

describe('isCalendarTimestamp', () => {
  it.each(['2026-01-01T00:00:00.000Z', '2024-02-29T23:59:59.999Z', '2000-02-29T12:00:00.000Z', '0001-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z'])(
    'accepts %s',
    (ts) => expect(isCalendarTimestamp(ts)).toBe(true),
  );

  it.each(['2026-02-29T00:00:00.000Z', '1900-02-29T00:00:00.000Z', '2026-04-31T00:00:00.000Z', '2026-13-01T00:00:00.000Z', '2026-00-10T00:00:00.000Z', '0000-01-01T00:00:00.000Z', '2026-01-01T24:00:00.000Z', '2026-01-01T23:60:00.000Z', '2026-01-01T23:59:60.000Z'])(
    'refuses %s',
    (ts) => expect(isCalendarTimestamp(ts)).toBe(false),
  );

  it('agrees with Date on every day of a leap and a common year', () => {
    for (const year of [2023, 2024]) {
      for (let month = 1; month <= 12; month++) {
        for (let day = 1; day <= 31; day++) {
          const ts = `${year}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}T00:00:00.000Z`;
          const viaDate = !Number.isNaN(Date.parse(ts)) && new Date(ts).toISOString() === ts;
          expect([ts, isCalendarTimestamp(ts)]).toEqual([ts, viaDate]);
        }
      }
    }
  });
});

describe('chainIdOfSubject', () => {
  it('takes the one token after the prefix, if it is a chain id', () => {
    expect(chainIdOfSubject('cairn.evidence.run_a1.run.submitted', 'cairn.evidence')).toBe('run_a1');
    expect(chainIdOfSubject('cairn.evidence.sbx_b-2.sandbox.requested', 'cairn.evidence')).toBe('sbx_b-2');
    // The earlier layout (one subject per chain) names no type.
    expect(chainIdOfSubject('cairn.evidence.run_a1', 'cairn.evidence')).toBeNull();
    expect(chainIdOfSubject('cairn.evidence.run_a1.Run.X', 'cairn.evidence')).toBeNull();
    expect(chainIdOfSubject('cairn.evidencex.run_a1.run.submitted', 'cairn.evidence')).toBeNull();
    expect(chainIdOfSubject('cairn.evidence.RUN_A1.run.submitted', 'cairn.evidence')).toBeNull();
  });
});

describe('jsonTextProblem', () => {
  it('counts brackets outside strings only', () => {
    expect(jsonTextProblem('[[[]]]', 3)).toBeNull();
    expect(jsonTextProblem('[[[[]]]]', 3)).toMatch(/deeper than 3/);
    expect(jsonTextProblem('{"a":{"b":[1]}}', 3)).toBeNull();
    expect(jsonTextProblem('{"a":"[[[[[[\\"[[[["}', 1)).toBeNull();
    expect(jsonTextProblem('[{"a":"\\\\"},[[1]]]', 3)).toBeNull();
    expect(jsonTextProblem('[{"a":"\\\\"},[[1]]]', 2)).not.toBeNull();
  });

  it('passes every number JavaScript writes and refuses what numeric overflows on', () => {
    for (const n of [0, -0, 1, -1.5, Number.MAX_VALUE, -Number.MIN_VALUE, 1e21, 2 ** -1000, 0.1 + 0.2, Number.MAX_SAFE_INTEGER]) {
      expect([n, jsonTextProblem(JSON.stringify({ n, list: [n, -n] }), 10)]).toEqual([n, null]);
    }
    expect(jsonTextProblem('{"a":1e-20000}', 10)).toMatch(/beyond/);
    expect(jsonTextProblem('[1E+1000]', 10)).toMatch(/beyond/);
    expect(jsonTextProblem(`[${'9'.repeat(41)}]`, 10)).toMatch(/beyond/);
    expect(jsonTextProblem('{"hash":"3e12345678"}', 10)).toBeNull();
  });
});

describe('mayBeUnstorable', () => {
  it('is true whenever jsonTextProblem finds something, wherever the number sits', () => {
    const numbers = ['1e-20000', '-1E+1000', '2.5e1234', `${'9'.repeat(41)}`, `-${'9'.repeat(40)}`, `0.${'1'.repeat(39)}`, '1e999', '12345678901234567890', '-0.5e-12'];
    const places = [(n: string) => n, (n: string) => ` \n${n}\t`, (n: string) => `[${n}]`, (n: string) => `[1, \r\n ${n}]`, (n: string) => `{"a":${n}}`, (n: string) => `{"a": "x",\n  "b" :\t${n}}`, (n: string) => `[[{"k":[ ${n} ]}]]`];
    let problems = 0;
    for (const n of numbers) {
      for (const place of places) {
        const text = place(n);
        expect(() => JSON.parse(text) as unknown).not.toThrow();
        if (jsonTextProblem(text, MAX_JSON_DEPTH) === null) continue;
        problems += 1;
        expect([text, mayBeUnstorable(text)]).toEqual([text, true]);
      }
    }
    expect(problems).toBeGreaterThan(30);
  });

  it('stays false for hex that looks like a number inside strings, and for deep text only past 1 024 characters', () => {
    expect(mayBeUnstorable('{"hash":"3e12345678","n":[1,2.5,-3e10],"d":"123456789012345678901234567890123456789012345"}')).toBe(false);
    expect(mayBeUnstorable('{"s":":1e1234"}')).toBe(true);
    expect(mayBeUnstorable(`${'['.repeat(600)}${']'.repeat(600)}`)).toBe(true);
  });
});
