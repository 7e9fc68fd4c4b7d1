import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderSchemaFiles } from './tools/generate-schemas.js';

const SCHEMA_DIR = new URL('../schema/', import.meta.url);
const HOW_TO_FIX = 'run `npm run build && npm run schemas` and commit libs/contracts/schema/';

function committed(name: string): string | null {
  try {
    return readFileSync(new URL(name, SCHEMA_DIR), 'utf8');
  } catch {
    return null;
  }
}

describe('committed JSON Schemas', () => {
  const expected = renderSchemaFiles();

  it.each(Object.keys(expected))('libs/contracts/schema/%s matches the contracts', (name) => {
    const text = committed(name);
    if (text === null) expect.fail(`libs/contracts/schema/${name} is missing: ${HOW_TO_FIX}`);
    if (text !== expected[name]) expect.fail(`libs/contracts/schema/${name} is stale: ${HOW_TO_FIX}`);
  });

  it('holds no schema the contracts no longer generate', () => {
    const extra = readdirSync(SCHEMA_DIR).filter((name) => name.endsWith('.json') && !(name in expected));
    expect(extra, `stale files in libs/contracts/schema/: ${HOW_TO_FIX}`).toEqual([]);
  });

  it('renders every schema pretty, with sorted keys and a trailing newline', () => {
    for (const text of Object.values(expected)) {
      expect(text.endsWith('}\n')).toBe(true);
      const parsed = JSON.parse(text) as Record<string, unknown>;
      expect(Object.keys(parsed)).toEqual(Object.keys(parsed).sort());
      expect(parsed['$schema']).toBe('https://json-schema.org/draft/2020-12/schema');
    }
  });
});
