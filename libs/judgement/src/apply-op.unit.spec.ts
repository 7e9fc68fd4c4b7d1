import { CHECK_OPS } from '@cairn/contracts';
import { sha256Hex } from '@cairn/kernel';
import { describe, expect, it } from 'vitest';
import { applyOp, evaluateOp, jsonEqual } from './apply-op.js';

const utf8 = (text: string) => new TextEncoder().encode(text);
const INVALID_UTF8 = new Uint8Array([0x61, 0xff]);

describe('applyOp', () => {
  it.each([
    // eq / ne
    ['eq', 0, 0, 'holds'],
    ['eq', 1, 0, 'fails'],
    ['eq', 'ok', 'ok', 'holds'],
    ['eq', 'ok\n', 'ok', 'fails'],
    ['eq', true, true, 'holds'],
    ['eq', null, null, 'holds'],
    ['eq', utf8('ok'), 'ok', 'holds'],
    ['eq', ['a', 'b'], ['a', 'b'], 'holds'],
    ['eq', { a: 1, b: [2] }, { b: [2], a: 1 }, 'holds'],
    ['ne', 1, 0, 'holds'],
    ['ne', 'x', 'x', 'fails'],
    ['eq', 0, '0', 'unreadable'],
    ['eq', null, 0, 'unreadable'],
    ['eq', true, 'true', 'unreadable'],
    ['eq', ['a'], 'a', 'unreadable'],
    ['eq', utf8('1'), 1, 'unreadable'],
    ['eq', INVALID_UTF8, 'a', 'unreadable'],
    ['eq', 1, undefined, 'unreadable'],
    ['ne', 0, '0', 'unreadable'],
    ['eq', Number.NaN, Number.NaN, 'unreadable'],
    // ordering
    ['lt', 1, 2, 'holds'],
    ['lt', 2, 2, 'fails'],
    ['lte', 2, 2, 'holds'],
    ['gt', 3, 2, 'holds'],
    ['gt', -1, 0, 'fails'],
    ['gte', 87.5, 80, 'holds'],
    ['gte', '90', 80, 'unreadable'],
    ['gte', null, 80, 'unreadable'],
    ['lt', 1, '2', 'unreadable'],
    ['lt', Number.POSITIVE_INFINITY, 2, 'unreadable'],
    // containment
    ['contains', 'all 12 passed', '12 passed', 'holds'],
    ['contains', 'all 12 passed', 'failed', 'fails'],
    ['contains', utf8('3 failed'), 'failed', 'holds'],
    ['not_contains', 'all passed', 'failed', 'holds'],
    ['not_contains', 'one failed', 'failed', 'fails'],
    ['contains', ['wall_time', 'memory'], 'memory', 'holds'],
    ['contains', [1, 2], 3, 'fails'],
    ['not_contains', ['wall_time'], 'memory', 'holds'],
    ['contains', 12, '1', 'unreadable'],
    ['contains', 'abc', 1, 'unreadable'],
    ['contains', INVALID_UTF8, 'a', 'unreadable'],
    ['contains', { a: 1 }, 'a', 'unreadable'],
    // matches
    ['matches', 'Tests: 2 passed, 0 failed', '\\b0 failed', 'holds'],
    ['matches', 'Tests: 2 passed, 1 failed', '\\b0 failed', 'fails'],
    ['matches', utf8('coverage 91%'), '^coverage (9\\d|100)%$', 'holds'],
    ['matches', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!', '(a+)+$', 'fails'],
    ['matches', 'abc', '(a)\\1', 'unreadable'],
    ['matches', 'abc', '(?=a)', 'unreadable'],
    ['matches', 'abc', '[', 'unreadable'],
    ['matches', 42, '4', 'unreadable'],
    ['matches', 'abc', 1, 'unreadable'],
    // sha256_eq
    ['sha256_eq', 'abc', sha256Hex('abc'), 'holds'],
    ['sha256_eq', utf8('abc'), sha256Hex('abc').toUpperCase(), 'holds'],
    ['sha256_eq', INVALID_UTF8, sha256Hex(INVALID_UTF8), 'holds'],
    ['sha256_eq', 'abd', sha256Hex('abc'), 'fails'],
    ['sha256_eq', 'abc', 'not a hash', 'unreadable'],
    ['sha256_eq', 12, sha256Hex('12'), 'unreadable'],
    // exists
    ['exists', 0, undefined, 'holds'],
    ['exists', '', undefined, 'holds'],
    ['exists', null, undefined, 'fails'],
    ['exists', 1, true, 'unreadable'],
    // not an op
    ['eval', 1, 1, 'unreadable'],
    ['toString', 1, 1, 'unreadable'],
    ['', 1, 1, 'unreadable'],
  ])('%s(%j, %j) is %s', (op, actual, expected, outcome) => {
    expect(applyOp(op, actual, expected)).toBe(outcome);
  });

  it('covers every op the RunSpec schema admits', () => {
    for (const op of CHECK_OPS) expect(evaluateOp(op, 'x', 'x').reason).not.toMatch(/not a registered op/);
  });

  it('says why a value could not be read', () => {
    expect(evaluateOp('eq', 0, '0')).toEqual({ outcome: 'unreadable', reason: 'type mismatch: the value is a number, the expected value a string' });
    expect(evaluateOp('eq', INVALID_UTF8, 'a')).toEqual({ outcome: 'unreadable', reason: 'the bytes are not valid UTF-8' });
    expect(evaluateOp('matches', 'a', '(a)\\1').reason).toMatch(/pattern refused: back-references/);
  });

  it('never throws, whatever it is given', () => {
    const values: unknown[] = [undefined, null, 0, -0, 1.5, Number.NaN, '', 'x', true, [], {}, [[[]]], utf8('x'), INVALID_UTF8, () => 1, Symbol('s'), 10n];
    for (const op of [...CHECK_OPS, 'nope']) {
      for (const actual of values) for (const expected of values) expect(() => applyOp(op, actual, expected)).not.toThrow();
    }
  });
});

describe('jsonEqual', () => {
  it('compares JSON structurally', () => {
    expect(jsonEqual({ a: [1, { b: null }] }, { a: [1, { b: null }] })).toBe(true);
    expect(jsonEqual({ a: 1 }, { a: 1, b: undefined })).toBe(false);
    expect(jsonEqual([1, 2], [2, 1])).toBe(false);
    expect(jsonEqual([], {})).toBe(false);
    expect(jsonEqual(utf8('a'), utf8('a'))).toBe(true);
    expect(jsonEqual(utf8('a'), { 0: 97 })).toBe(false);
  });
});
