import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { SandboxIdSchema } from '@cairn/contracts';
import { decodePageCursor, decodeRunCursor, encodePageCursor, encodeRunCursor } from './run-cursor.codec.js';

function codeOf(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (error) {
    return isCairnError(error) ? error.code : 'not a CairnError';
  }
}

describe('run cursors', () => {
  it('round-trip (created_at, run_id) as opaque base64url', () => {
    const cursor = { createdAt: '2026-11-30T01:02:03.456Z', runId: 'run_01jabcdefgh' };
    const text = encodeRunCursor(cursor);
    expect(text).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeRunCursor(text)).toEqual(cursor);
  });

  it('refuse anything this API did not issue with E_INPUT', () => {
    const forged = [
      '',
      'not base64 !',
      Buffer.from('{"a":1}').toString('base64url'),
      Buffer.from('["2026-11-30", "run_x"]').toString('base64url'),
      Buffer.from('["2026-11-30T01:02:03.456Z", "RUN_X"]').toString('base64url'),
      Buffer.from("['2026-11-30T01:02:03.456Z', 'run_x']").toString('base64url'),
    ];
    for (const text of forged) expect(codeOf(() => decodeRunCursor(text))).toBe('E_INPUT');
  });

  it('page sandboxes the same way, and a cursor of one kind is not taken for the other', () => {
    const cursor = { createdAt: '2026-11-30T01:02:03.456Z', id: 'sbx_01jabcdefgh' };
    const text = encodePageCursor(cursor);
    expect(decodePageCursor(text, SandboxIdSchema)).toEqual(cursor);
    expect(codeOf(() => decodeRunCursor(text))).toBe('E_INPUT');
    const runCursor = encodeRunCursor({ createdAt: cursor.createdAt, runId: 'run_01jabcdefgh' });
    expect(codeOf(() => decodePageCursor(runCursor, SandboxIdSchema))).toBe('E_INPUT');
  });
});

