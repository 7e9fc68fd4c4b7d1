import { describe, expect, it } from 'vitest';
import { compileSafeRegex, regexMatch, SAFE_REGEX_LIMITS, safeRegexTest } from './safe-regex.js';

function compiled(pattern: string) {
  const result = compileSafeRegex(pattern);
  if (!result.ok) throw new Error(`expected ${pattern} to compile: ${result.reason}`);
  return result.regex;
}

/** Asserts the safe engine agrees with V8's backtracking RegExp in `u` mode. */
function expectSameAsJs(pattern: string, text: string): void {
  const ours = safeRegexTest(compiled(pattern), text);
  expect(ours, `${pattern} on ${JSON.stringify(text)}`).toEqual({ ok: true, matched: new RegExp(pattern, 'u').test(text) });
}

/** A small deterministic PRNG (mulberry32), so the fuzz cases are the same on every run. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('safe regex: the same answers as JavaScript', () => {
  const patterns = [
    'abc',
    'a|b|',
    '^abc$',
    '^$',
    'colou?r',
    'x{2}',
    'x{2,}',
    'x{1,3}y',
    'x{0}y',
    '[a-c]+d',
    '[^a-c]',
    '[\\d.-]+',
    '[-a]',
    '[a-]',
    '[]',
    '[^]',
    '\\bword\\b',
    '\\Bor\\B',
    '\\d{3}-\\d{4}',
    '\\w+@\\w+\\.com',
    '\\s+',
    '\\S\\W\\D',
    'a.c',
    '(?s:a.c)',
    '(?m:^b$)',
    '^b$',
    '(?i:HeLLo)',
    '(?i:[a-c]x)',
    '(?i:[^a])',
    '(?i:k)',
    '(?i:é)',
    'ß',
    '(?<year>\\d{4})-(?:\\d\\d)',
    '(a|ab)(c|bcd)(d*)',
    '(a*)*b',
    '(a+)+$',
    '(?:a?){3}a{3}',
    '\\u0041\\x42\\u{1F600}',
    '\\uD83D\\uDE00',
    '😀+',
    '.',
    '\\n\\t',
    '\\cJ',
    '\\0',
    'a*?b',
    'a+?',
    'a??b',
    '\\/\\*\\.',
    'passed: [1-9]\\d* failed: 0',
    '^ok \\d+ - .*$',
    '(?m:^not ok)',
  ];
  const texts = [
    '',
    'abc',
    'b',
    'color colour',
    'xx',
    'xxxy',
    'abd',
    'zzz',
    '1.2-3',
    'a word here',
    'sword',
    '555-1234',
    'me@example.com',
    ' \t\n',
    'a\nc',
    'a\nb\nc',
    'HELLO world',
    'Bx',
    'A',
    'S',
    'ſ',
    'K',
    '\u212a',
    'É',
    'ẞ',
    '2026-11',
    'abcd',
    'aaaaaaaaaaaaaaaab',
    'aaaaaaaaaaaaaaaa!',
    'ABC😀',
    '😀😀',
    '\n\t',
    '\n',
    '\u0000',
    'aab',
    '/*.',
    'passed: 12 failed: 0',
    'ok 1 - adds\nnot ok 2 - subtracts',
  ];

  it.each(patterns)('agrees with RegExp(%j, "u") on a corpus of texts', (pattern) => {
    for (const text of texts) expectSameAsJs(pattern, text);
  });

  it('agrees with RegExp on 3000 random patterns and texts, case-sensitive and not', () => {
    const random = prng(20261130);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const atoms = ['a', 'b', 'c', 'k', 's', 'ſ', '.', '[ab]', '[^a]', '[a-cS]', '\\d', '\\w', '\\W', '\\s', '^', '$', '\\b', '\\B', 'x'];
    const quantifiers = ['', '', '', '*', '+', '?', '{2}', '{1,2}', '{0,}', '*?'];
    const build = (depth: number): string => {
      let out = '';
      const parts = 1 + Math.floor(random() * 4);
      for (let k = 0; k < parts; k++) {
        let atom = depth < 2 && random() < 0.25 ? `(${build(depth + 1)}${random() < 0.4 ? `|${build(depth + 1)}` : ''})` : pick(atoms);
        if (!['^', '$', '\\b', '\\B'].includes(atom)) atom += pick(quantifiers);
        out += atom;
      }
      return out;
    };
    const alphabet = ['a', 'b', 'c', 'x', '1', ' ', '\n', 'A', 'S', 's', 'ſ', 'k', 'K', '\u212a', 'é'];
    for (let k = 0; k < 3000; k++) {
      const pattern = build(0);
      const text = Array.from({ length: Math.floor(random() * 10) }, () => pick(alphabet)).join('');
      if (random() < 0.3) {
        // Case-insensitive: compared with the i flag, not with V8's modifier groups (see the next test).
        const ours = safeRegexTest(compiled(`(?i:${pattern})`), text);
        expect(ours, `(?i:${pattern}) on ${JSON.stringify(text)}`).toEqual({ ok: true, matched: new RegExp(pattern, 'iu').test(text) });
      } else {
        expectSameAsJs(pattern, text);
      }
    }
  });

  it('folds case as the specification says, where V8 strays', () => {
    // ſ and S fold alike (CaseFolding.txt); V8 agrees with /ſ/iu but not inside its (?i:…) groups.
    expect(new RegExp('ſ', 'iu').test('S')).toBe(true);
    expect(safeRegexTest(compiled('(?i:ſ)'), 'S')).toEqual({ ok: true, matched: true });
    expect(safeRegexTest(compiled('(?i:k)'), '\u212a')).toEqual({ ok: true, matched: true });
    // Dotless ı has no simple folding: it matches neither i nor I.
    expect(safeRegexTest(compiled('(?i:ı)'), 'iI')).toEqual({ ok: true, matched: false });
    expect(safeRegexTest(compiled('(?i:i)'), 'ı')).toEqual({ ok: true, matched: false });
    // A modifier group's case-insensitivity ends with the group.
    expect(safeRegexTest(compiled('(?i:a)b'), 'AB')).toEqual({ ok: true, matched: false });
    expect(safeRegexTest(compiled('(?i:a(?-i:b))'), 'Ab')).toEqual({ ok: true, matched: true });
  });

  it('only matches at code point boundaries (V8 lets \\B match inside a surrogate pair)', () => {
    expect(safeRegexTest(compiled('\\B'), 'A😀k')).toEqual({ ok: true, matched: false });
    expect(safeRegexTest(compiled('^.$'), '😀')).toEqual({ ok: true, matched: true });
  });
});

describe('safe regex: patterns outside the subset are refused, never approximated', () => {
  it.each([
    ['(a)\\1', /back-references/],
    ['(?<n>a)\\k<n>', /named back-references/],
    ['a(?=b)', /lookaround/],
    ['a(?!b)', /lookaround/],
    ['(?<=a)b', /lookaround/],
    ['(?<!a)b', /lookaround/],
    ['\\p{L}', /property/],
    ['[\\p{L}]', /property/],
    ['(', /unterminated group/],
    ['a)', /unmatched/],
    ['[a', /unterminated character class/],
    ['*a', /nothing to repeat/],
    ['a**', /nothing to repeat/],
    ['a{2}{3}', /nothing to repeat/],
    ['{', /lone/],
    ['a{', /lone/],
    [']', /lone/],
    ['}', /lone/],
    ['^*', /assertion cannot be repeated/],
    ['[z-a]', /out of order/],
    ['[\\d-z]', /class escape in a range/],
    ['a{3,2}', /out of order/],
    ['\\q', /invalid escape/],
    ['\\-', /invalid escape/],
    ['\\01', /octal/],
    ['(?x:a)', /invalid group/],
    ['(?i-i:a)', /repeated flag/],
    ['a{1001}', /repeat bound/],
    ['\\', /end of pattern/],
  ])('Given %j, when compiled, then it is refused (%s)', (pattern, reason) => {
    const result = compileSafeRegex(pattern);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toMatch(reason);
  });

  it('refuses a pattern longer than the limit', () => {
    const result = compileSafeRegex('a'.repeat(SAFE_REGEX_LIMITS.maxPatternLength + 1));
    expect(result).toMatchObject({ ok: false, reason: expect.stringMatching(/longer than/) as unknown });
  });

  it('refuses counted repeats that expand past the program limit', () => {
    expect(compileSafeRegex('((a{1000}){1000})')).toMatchObject({ ok: false, reason: expect.stringMatching(/instructions/) as unknown });
  });

  it('refuses groups nested past the limit', () => {
    const depth = SAFE_REGEX_LIMITS.maxNesting + 1;
    expect(compileSafeRegex('('.repeat(depth) + 'a' + ')'.repeat(depth))).toMatchObject({ ok: false });
  });

  it('regexMatch reports a refused pattern as not ok instead of throwing', () => {
    expect(regexMatch('aaa', '(a)\\1')).toMatchObject({ ok: false });
  });
});

describe('safe regex: catastrophic patterns stay linear', () => {
  it.each([
    ['(a+)+$', `${'a'.repeat(100_000)}!`],
    ['(a|a)*b', 'a'.repeat(100_000)],
    ['(a*)*b', 'a'.repeat(100_000)],
    ['(\\w+\\s?)+$', `${'word '.repeat(20_000)}!`],
    ['^(([a-z])+.)+[A-Z]([a-z])+$', 'a'.repeat(50_000)],
  ])('Given the classic ReDoS %j, when searched over a long text, then it answers quickly', (pattern, text) => {
    const started = performance.now();
    const result = safeRegexTest(compiled(pattern), text);
    expect(result).toEqual({ ok: true, matched: false });
    // V8's backtracking engine would not finish these in a lifetime; generous for a loaded machine.
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('gives up past its step budget instead of running on', () => {
    const result = safeRegexTest(compiled('(x|a)*a{20}b'), `${'a'.repeat(10_000)}cb`, 10_000);
    expect(result).toMatchObject({ ok: false, reason: expect.stringMatching(/steps/) as unknown });
  });

  it('stops early when an anchored pattern can no longer match', () => {
    const result = safeRegexTest(compiled('^x'), 'a'.repeat(1_000_000), 100);
    expect(result).toEqual({ ok: true, matched: false });
  });

  it('refuses a text longer than the input limit', () => {
    const result = safeRegexTest(compiled('a'), ' '.repeat(SAFE_REGEX_LIMITS.maxInputLength + 1));
    expect(result).toMatchObject({ ok: false, reason: expect.stringMatching(/longer than/) as unknown });
  });
});
