import type { OpEnd } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { AnsweredOps } from './answered-ops.js';

const done: OpEnd = { ok: true, seq: 7, stream_seq: 40, chunks: { stdout: 3, stderr: 1, data: 0 }, sandbox_destroyed: false };
const refused: OpEnd = { ok: false, error: { code: 'E_INPUT', message: 'bad path' } };

describe('AnsweredOps', () => {
  it('an op seen for the first time is new; a repeat gets the first answer, with no chunks sent again', () => {
    const ops = new AnsweredOps();
    expect(ops.begin('op-1')).toEqual({ kind: 'new' });
    ops.answered('op-1', done);
    expect(ops.begin('op-1')).toEqual({ kind: 'repeat', answer: { ...done, chunks: { stdout: 0, stderr: 0, data: 0 } } });
    expect(ops.begin('op-1')).toEqual({ kind: 'repeat', answer: { ...done, chunks: { stdout: 0, stderr: 0, data: 0 } } });
  });

  it('a repeat of a refused op is refused the same way; one still under way answers null', () => {
    const ops = new AnsweredOps();
    ops.begin('op-bad');
    ops.answered('op-bad', refused);
    expect(ops.begin('op-bad')).toEqual({ kind: 'repeat', answer: refused });
    ops.begin('op-slow');
    expect(ops.begin('op-slow')).toEqual({ kind: 'repeat', answer: null });
  });

  it('keeps at most `kept` answers, forgetting the oldest; an answer for a forgotten op is not kept', () => {
    const ops = new AnsweredOps(2);
    ops.begin('a');
    ops.begin('b');
    ops.begin('c');
    expect(ops.size).toBe(2);
    ops.answered('a', done);
    expect(ops.size).toBe(2);
    expect(ops.begin('a')).toEqual({ kind: 'new' });
    expect(ops.begin('c')).toEqual({ kind: 'repeat', answer: null });
    expect(() => new AnsweredOps(0)).toThrow(RangeError);
  });
});
