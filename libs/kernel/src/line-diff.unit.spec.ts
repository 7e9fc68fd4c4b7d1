import { describe, expect, it } from 'vitest';
import { KERNEL_LIMITS } from './kernel-limits.constants.js';
import type { LineDiff } from './line-diff.operation.js';
import { lineDiff } from './line-diff.operation.js';

function diff(before: string, after: string): LineDiff {
  const result = lineDiff(before, after);
  if (!result.ok) throw new Error(result.reason);
  return result.diff;
}

/** Rebuilds `after` from `before` and the listed edits, so the edit script is checked, not just counted. */
function apply(before: string, d: LineDiff): string[] {
  const lines = before === '' ? [] : before.replace(/\n$/, '').split('\n');
  const removed = new Set(d.edits.filter((e) => e.op === 'remove').map((e) => e.line));
  const kept = lines.filter((_, k) => !removed.has(k + 1));
  const out: string[] = [];
  const adds = d.edits.filter((e) => e.op === 'add');
  let next = 0;
  for (let line = 1; out.length < kept.length + adds.length; line++) {
    const add = adds.find((e) => e.line === line);
    out.push(add === undefined ? kept[next++]! : add.text);
  }
  return out;
}

describe('lineDiff', () => {
  it('Given equal texts, when diffed, then nothing changed', () => {
    expect(diff('a\nb\nc\n', 'a\nb\nc\n')).toEqual({ added: 0, removed: 0, unchanged: 3, edits: [], listed_all: true });
  });

  it('Given a changed line, when diffed, then it is one removal and one addition', () => {
    expect(diff('a\nb\nc\n', 'a\nB\nc\n')).toEqual({
      added: 1,
      removed: 1,
      unchanged: 2,
      edits: [
        { op: 'remove', line: 2, text: 'b' },
        { op: 'add', line: 2, text: 'B' },
      ],
      listed_all: true,
    });
  });

  it('Given lines added and removed in places, when diffed, then the script is minimal and rebuilds the new text', () => {
    const before = 'one\ntwo\nthree\nfour\nfive\n';
    const after = 'zero\none\nthree\nfour\nfour and a half\nfive\n';
    const d = diff(before, after);
    expect(d).toMatchObject({ added: 2, removed: 1, unchanged: 4 });
    expect(apply(before, d)).toEqual(after.replace(/\n$/, '').split('\n'));
  });

  it('Given random edits, when diffed, then applying the edits always rebuilds the new text', () => {
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    for (let round = 0; round < 200; round++) {
      const before = Array.from({ length: Math.floor(random() * 30) }, () => 'abcde'[Math.floor(random() * 5)]!);
      const after = before.flatMap((line) => (random() < 0.2 ? [] : random() < 0.2 ? [line, 'new'] : [line]));
      const d = diff(before.join('\n'), after.join('\n'));
      expect(apply(before.join('\n'), d)).toEqual(after);
      expect(d.unchanged + d.removed).toBe(before.length);
      expect(d.unchanged + d.added).toBe(after.length);
    }
  });

  it('Given an empty side, when diffed, then every line is added or removed', () => {
    expect(diff('', 'a\nb')).toMatchObject({ added: 2, removed: 0, unchanged: 0 });
    expect(diff('a\nb\n', '')).toMatchObject({ added: 0, removed: 2, unchanged: 0 });
    expect(diff('', '')).toMatchObject({ added: 0, removed: 0, unchanged: 0 });
  });

  it('Given texts that differ by more edits than allowed, when diffed, then it gives up instead of working on', () => {
    expect(lineDiff('a\nb\nc\nd', 'w\nx\ny\nz', 3)).toMatchObject({ ok: false, reason: expect.stringMatching(/more than 3/) as unknown });
  });

  it('Given more lines than the limit, when diffed, then it is refused', () => {
    const big = 'x\n'.repeat(KERNEL_LIMITS.maxDiffLines + 1);
    expect(lineDiff(big, '')).toMatchObject({ ok: false });
  });

  it('Given many edits, when diffed, then the counts are complete and the listing is bounded', () => {
    const before = Array.from({ length: 500 }, (_, k) => `old ${k}`).join('\n');
    const after = Array.from({ length: 500 }, (_, k) => `new ${k}`).join('\n');
    const d = diff(before, after);
    expect(d).toMatchObject({ added: 500, removed: 500, listed_all: false });
    expect(d.edits).toHaveLength(KERNEL_LIMITS.maxDiffListed);
  });

  it('Given a very long line, when listed, then it is cut and stays well formed', () => {
    const long = `${'x'.repeat(KERNEL_LIMITS.maxDiffLineLength - 1)}😀tail`;
    const [edit] = diff('', long).edits;
    expect(edit!.text.length).toBeLessThanOrEqual(KERNEL_LIMITS.maxDiffLineLength);
    expect(edit!.text.isWellFormed()).toBe(true);
  });
});
