import { KERNEL_LIMITS } from './kernel-limits.constants.js';

export interface LineEdit {
  op: 'add' | 'remove';
  /** 1-based line number: in `after` for an addition, in `before` for a removal. */
  line: number;
  /** The line, cut to `maxDiffLineLength` characters. */
  text: string;
}

export interface LineDiff {
  added: number;
  removed: number;
  unchanged: number;
  /** In order of position; at most `maxDiffListed` of them. */
  edits: LineEdit[];
  /** False when `edits` was cut short (the counts are still complete). */
  listed_all: boolean;
}

export type LineDiffResult = { ok: true; diff: LineDiff } | { ok: false; reason: string };

/**
 * A minimal line diff (Myers' O((N+M)·D) algorithm) between two texts. Lines split on `\n`; a final
 * newline does not make an extra empty line. Bounded: at most `maxDiffLines` lines a side and
 * `maxDiffEdits` edits, past which it reports `ok: false` rather than work without end.
 */
export function lineDiff(before: string, after: string, maxEdits: number = KERNEL_LIMITS.maxDiffEdits): LineDiffResult {
  const a = splitLines(before);
  const b = splitLines(after);
  if (a.length > KERNEL_LIMITS.maxDiffLines || b.length > KERNEL_LIMITS.maxDiffLines) {
    return { ok: false, reason: `more than ${KERNEL_LIMITS.maxDiffLines} lines on a side` };
  }
  // Lines become integers so the inner loop compares numbers.
  const ids = new Map<string, number>();
  const intern = (line: string): number => {
    let id = ids.get(line);
    if (id === undefined) ids.set(line, (id = ids.size));
    return id;
  };
  const x = Int32Array.from(a, intern);
  const y = Int32Array.from(b, intern);

  let head = 0;
  while (head < x.length && head < y.length && x[head] === y[head]) head++;
  let tail = 0;
  while (tail < x.length - head && tail < y.length - head && x[x.length - 1 - tail] === y[y.length - 1 - tail]) tail++;

  const script = myers(x.subarray(head, x.length - tail), y.subarray(head, y.length - tail), Math.min(maxEdits, KERNEL_LIMITS.maxDiffEdits));
  if (script === null) return { ok: false, reason: `the texts differ by more than ${maxEdits} lines` };

  const edits: LineEdit[] = [];
  let added = 0;
  let removed = 0;
  for (const edit of script) {
    if (edit.op === 'add') added++;
    else removed++;
    if (edits.length < KERNEL_LIMITS.maxDiffListed) {
      const text = edit.op === 'add' ? b[head + edit.index]! : a[head + edit.index]!;
      edits.push({ op: edit.op, line: head + edit.index + 1, text: text.slice(0, KERNEL_LIMITS.maxDiffLineLength).toWellFormed() });
    }
  }
  return { ok: true, diff: { added, removed, unchanged: a.length - removed, edits, listed_all: edits.length === script.length } };
}

function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

type Edit = { op: 'add' | 'remove'; index: number };

/** The shortest edit script from `a` to `b`, or null past `maxD` edits. Indices are 0-based. */
function myers(a: Int32Array, b: Int32Array, maxD: number): Edit[] | null {
  const n = a.length;
  const m = b.length;
  const limit = Math.min(n + m, maxD);
  const offset = limit + 1;
  const v = new Int32Array(2 * limit + 3);
  // trace[d] is v for diagonals -d..d after round d.
  const trace: Int32Array[] = [];
  for (let d = 0; d <= limit; d++) {
    for (let k = -d; k <= d; k += 2) {
      let px = k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!) ? v[offset + k + 1]! : v[offset + k - 1]! + 1;
      let py = px - k;
      while (px < n && py < m && a[px] === b[py]) {
        px++;
        py++;
      }
      v[offset + k] = px;
      if (px >= n && py >= m) {
        trace.push(v.slice(offset - d, offset + d + 1));
        return backtrack(trace, n, m);
      }
    }
    trace.push(v.slice(offset - d, offset + d + 1));
  }
  return null;
}

function backtrack(trace: Int32Array[], n: number, m: number): Edit[] {
  const edits: Edit[] = [];
  let x = n;
  let y = m;
  for (let d = trace.length - 1; d > 0; d--) {
    const previous = trace[d - 1]!;
    const at = (k: number): number => previous[k + d - 1]!;
    const k = x - y;
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
    const prevX = at(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      x--;
      y--;
    }
    if (x === prevX) edits.push({ op: 'add', index: prevY });
    else edits.push({ op: 'remove', index: prevX });
    x = prevX;
    y = prevY;
  }
  return edits.reverse();
}
