import { describe, expect, it } from 'vitest';
import { checkJsonText, MAX_JSON_DEPTH, parseStrictJson } from './strict-json.js';

function refusal(text: string, maxDepth?: number): { code: string; message: string } {
  try {
    parseStrictJson(text, maxDepth === undefined ? {} : { maxDepth });
  } catch (error) {
    return { code: (error as { code: string }).code, message: (error as Error).message };
  }
  throw new Error(`accepted: ${text}`);
}

describe('parseStrictJson', () => {
  it('parses JSON whose names are unique, at any depth up to the limit', () => {
    expect(parseStrictJson('{"name":"a","steps":[{"argv":["echo","{\\"name\\":1,\\"name\\":2}"]},{"argv":["b"]}]}')).toEqual({
      name: 'a',
      steps: [{ argv: ['echo', '{"name":1,"name":2}'] }, { argv: ['b'] }],
    });
    // The same name in sibling objects is not a duplicate.
    expect(parseStrictJson('[{"a":1},{"a":2}]')).toEqual([{ a: 1 }, { a: 2 }]);
    expect(parseStrictJson(`${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`)).toBeInstanceOf(Array);
    expect(parseStrictJson('"just a string"')).toBe('just a string');
  });

  it('refuses a duplicate name, naming where it is', () => {
    expect(refusal('{"name":"a","name":"b"}')).toEqual({ code: 'E_INPUT', message: 'name: duplicate key (ambiguous JSON is refused)' });
    expect(refusal('{"name":"x","steps":[{"argv":["true"]},{"argv":["true"],"argv":["rm","-rf","/"]}]}').message).toBe(
      'steps[1].argv: duplicate key (ambiguous JSON is refused)',
    );
    expect(refusal('{"caps":{"pids":1},"files":[],"caps":{}}').message).toMatch(/^caps: duplicate key/);
  });

  it('compares names after unescaping', () => {
    expect(refusal('{"name":"a","n\\u0061me":"b"}').message).toMatch(/^name: duplicate key/);
    expect(refusal('{"a\\"b":1,"a\\u0022b":2}').message).toMatch(/^\["a\\"b"\]: duplicate key/);
  });

  it('refuses nesting deeper than the limit, naming where it starts', () => {
    const deep = `{"name":"x","x":${'['.repeat(10_000)}${']'.repeat(10_000)}}`;
    expect(refusal(deep)).toEqual({ code: 'E_INPUT', message: `x${'[0]'.repeat(MAX_JSON_DEPTH - 1)}: JSON nested deeper than ${MAX_JSON_DEPTH} levels` });
    expect(refusal('{"a":{"b":{"c":1}}}', 2).message).toBe('a.b: JSON nested deeper than 2 levels');
  });

  it('refuses text that is not JSON with E_INPUT', () => {
    expect(refusal('{"name":').code).toBe('E_INPUT');
    expect(refusal('').code).toBe('E_INPUT');
  });

  it('checkJsonText is linear: a megabyte of members is checked quickly', () => {
    const members = Array.from({ length: 50_000 }, (_, i) => `"k${i}":${i}`).join(',');
    const started = performance.now();
    checkJsonText(`{${members}}`);
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
