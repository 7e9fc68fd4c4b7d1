import { describe, expect, it } from 'vitest';
import { jsonPath, parseJson, parseJsonPath, selectPath } from './json-path.operation.js';

const DOC = JSON.stringify({
  summary: { passed: 12, failed: 0, 'with space': true, 'quo"te': 'q', "it's": 'apostrophe' },
  results: [{ name: 'a', ok: true }, { name: 'b', ok: false }],
  empty: null,
});

describe('jsonPath', () => {
  it.each([
    ['$', JSON.parse(DOC) as unknown],
    ['$.summary.passed', 12],
    ['$.summary.failed', 0],
    ['$["summary"]["with space"]', true],
    ['$.summary["quo\\"te"]', 'q'],
    ["$.summary['it\\'s']", 'apostrophe'],
    ['$.results[1].name', 'b'],
    ['$.results[0]["ok"]', true],
    ['$.empty', null],
  ])('Given %s, when selected, then it finds the value', (path, value) => {
    expect(jsonPath(DOC, path)).toEqual({ found: true, value });
  });

  it.each([
    ['$.missing', /has no key "missing"/],
    ['$.results[2]', /has no element 2/],
    ['$.summary[0]', /is not an array/],
    ['$.results.name', /is not an object/],
    ['$.empty.x', /is not an object/],
    ['$.constructor', /has no key "constructor"/],
    ['$.__proto__', /has no key "__proto__"/],
    ['$.summary.toString', /has no key "toString"/],
  ])('Given %s, when selected, then nothing is found (%s)', (path, reason) => {
    const result = jsonPath(DOC, path);
    expect(result.found).toBe(false);
    if (!result.found) expect(result.reason).toMatch(reason);
  });

  it.each([
    ['summary.passed', /starts with '\$'/],
    ['$..passed', /a name must follow/],
    ['$.results[*]', /non-negative integer/],
    ['$.results[-1]', /non-negative integer/],
    ['$.results[01]', /non-negative integer/],
    ['$.results[0:2]', /non-negative integer/],
    ['$["unterminated]', /unterminated/],
    ['$.a b', /unexpected ' '/],
    ['$[?(@.ok)]', /non-negative integer/],
    [`$${'.a'.repeat(1100)}`, /longer than/],
  ])('Given the path %s outside the safe subset, when parsed, then it is refused', (path, reason) => {
    const parsed = parseJsonPath(path);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.reason).toMatch(reason);
  });

  it('Given a JSON document whose own key is __proto__, when selected, then it is read as data', () => {
    expect(jsonPath('{"__proto__": {"polluted": 1}}', '$.__proto__.polluted')).toEqual({ found: true, value: 1 });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('Given bytes with a BOM, when parsed, then the BOM is skipped', () => {
    const bytes = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode('{"a": [1, 2]}')]);
    expect(jsonPath(bytes, '$.a[1]')).toEqual({ found: true, value: 2 });
  });

  it('Given text that is not JSON or bytes that are not UTF-8, when selected, then nothing is found', () => {
    expect(jsonPath('{"a": ', '$.a')).toMatchObject({ found: false, reason: expect.stringMatching(/not JSON/) as unknown });
    expect(parseJson(new Uint8Array([0x7b, 0xff, 0x7d]))).toMatchObject({ ok: false, reason: 'not valid UTF-8' });
  });

  it('selects from an already parsed value with a described path', () => {
    const parsed = parseJsonPath('$.a[0]');
    if (!parsed.ok) throw new Error(parsed.reason);
    expect(selectPath({ a: [] }, parsed.segments, 'facts')).toEqual({ found: false, reason: 'facts.a has no element 0' });
  });
});
