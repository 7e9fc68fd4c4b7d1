import { CairnError, RunIdSchema, TimestampSchema } from '@cairn/contracts';
import { z } from 'zod';

/** Where a page of runs (newest first) ended: the last run's `createdAt` and id. */
export interface RunCursor {
  createdAt: string;
  runId: string;
}

const CursorSchema = z.tuple([TimestampSchema, RunIdSchema]);

/** Opaque to clients: base64url of `[createdAt, runId]`. */
export function encodeRunCursor(cursor: RunCursor): string {
  return Buffer.from(JSON.stringify([cursor.createdAt, cursor.runId]), 'utf8').toString('base64url');
}

/** A cursor this gateway issued, or E_INPUT. */
export function decodeRunCursor(text: string): RunCursor {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    value = undefined;
  }
  const parsed = CursorSchema.safeParse(value);
  if (!parsed.success) throw new CairnError('E_INPUT', 'cursor: not a cursor this API issued (pass nextCursor back unchanged)', { field: 'cursor' });
  const [createdAt, runId] = parsed.data;
  return { createdAt, runId };
}
