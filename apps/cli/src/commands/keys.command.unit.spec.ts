import { describe, expect, it } from 'vitest';
import { parseDurationSeconds, parseExpires, parseScope } from './keys.command.js';

describe('cairn keys arguments', () => {
  it('reads durations in s, m, h, d and w', () => {
    expect(parseDurationSeconds('90s')).toBe(90);
    expect(parseDurationSeconds('15m')).toBe(900);
    expect(parseDurationSeconds('12h')).toBe(43_200);
    expect(parseDurationSeconds('30d')).toBe(2_592_000);
    expect(parseDurationSeconds('2w')).toBe(1_209_600);
    for (const bad of ['', '0d', '1y', '-1d', '1.5h', 'd', '12 h']) expect(parseDurationSeconds(bad), bad).toBeNull();
  });

  it('takes --expires as a duration from now or a date, in the future only, as E_INPUT otherwise', () => {
    const now = new Date('2026-06-01T00:00:00.000Z');
    expect(parseExpires('30d', now)).toBe('2026-07-01T00:00:00.000Z');
    expect(parseExpires('2027-01-01', now)).toBe('2027-01-01T00:00:00.000Z');
    expect(parseExpires('2027-01-01T10:00:00Z', now)).toBe('2027-01-01T10:00:00.000Z');
    for (const bad of ['2020-01-01', 'tomorrow', '2027-13-45', '']) expect(() => parseExpires(bad, now), bad).toThrow(expect.objectContaining({ code: 'E_INPUT' }));
  });

  it('collects each --scope once and refuses an unknown one', () => {
    expect(parseScope('runs:write', parseScope('runs:read'))).toEqual(['runs:read', 'runs:write']);
    expect(parseScope('runs:read', ['runs:read'])).toEqual(['runs:read']);
    expect(() => parseScope('root')).toThrow(expect.objectContaining({ code: 'E_INPUT' }));
  });
});
