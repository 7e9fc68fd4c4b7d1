import { ExecIdSchema } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { newExecId } from './sandbox-sessions.nats.js';

describe('newExecId', () => {
  it('is a token (lowercase, at most 64 characters) carrying all 128 random bits', () => {
    const random = Uint8Array.from({ length: 16 }, (_, i) => (i * 37 + 5) & 0xff);
    const id = newExecId(random);
    expect(ExecIdSchema.safeParse(id).success).toBe(true);
    expect(id).toBe(`x${Buffer.from(random).toString('hex')}`);
    // Ids that differ only in the case of a letter somewhere are two ids, not one (a case-folded nuid's flaw).
    const other = Uint8Array.from(random);
    other[15] = random[15]! ^ 0x20;
    expect(newExecId(other)).not.toBe(id);
  });

  it('never repeats over a hundred thousand ids from one process', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 100_000; i++) ids.add(newExecId());
    expect(ids.size).toBe(100_000);
    for (const id of [...ids].slice(0, 100)) expect(ExecIdSchema.safeParse(id).success).toBe(true);
  });
});
