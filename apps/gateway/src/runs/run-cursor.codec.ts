import { CairnError, RunIdSchema, TimestampSchema } from '@cairn/contracts';
import { z } from 'zod';

/** Where a page of runs (newest first) ended: the last run's `createdAt` and id. */
export interface RunCursor {
  createdAt: string;
  runId: string;
}

/** Where a page of a chain's views (runs, sandboxes; newest first) ended: the last one's `createdAt` and id. */
export interface PageCursor {
  createdAt: string;
  id: string;
}

/** Opaque to clients: base64url of `[createdAt, id]`. */
export function encodePageCursor(cursor: PageCursor): string {
  return Buffer.from(JSON.stringify([cursor.createdAt, cursor.id]), 'utf8').toString('base64url');
}

/** A cursor this gateway issued for ids of `idSchema`, or E_INPUT. */
export function decodePageCursor(text: string, idSchema: z.ZodType<string>): PageCursor {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    value = undefined;
  }
  const parsed = z.tuple([TimestampSchema, idSchema]).safeParse(value);
  if (!parsed.success) throw new CairnError('E_INPUT', 'cursor: not a cursor this API issued (pass nextCursor back unchanged)', { field: 'cursor' });
  const [createdAt, id] = parsed.data;
  return { createdAt, id };
}

export function encodeRunCursor(cursor: RunCursor): string {
  return encodePageCursor({ createdAt: cursor.createdAt, id: cursor.runId });
}

export function decodeRunCursor(text: string): RunCursor {
  const { createdAt, id } = decodePageCursor(text, RunIdSchema);
  return { createdAt, runId: id };
}
