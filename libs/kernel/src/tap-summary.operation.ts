import { KERNEL_LIMITS } from './kernel-limits.constants.js';
import { decodeUtf8Lenient } from './text.operation.js';

/**
 * Counts from a TAP (Test Anything Protocol, versions 12–14) stream. Only top-level lines count:
 * indented subtests and YAML blocks are summarised by their parent's test point. Each test point is
 * exactly one of passed (`ok`), failed (`not ok`), skipped (`# SKIP…` directive, whatever its
 * status) or todo (`# TODO…` directive, whatever its status: a failing TODO is not a failure).
 * Lines that are not TAP are ignored.
 */
export interface TapSummary {
  /** From the plan line `1..N`; null when the stream has no plan. */
  planned: number | null;
  /** Test points seen. */
  tests: number;
  passed: number;
  failed: number;
  skipped: number;
  todo: number;
  bailed_out: boolean;
  /** The text after `Bail out!`, at most 200 characters; null when there was no bail-out. */
  bail_reason: string | null;
  /** A plan, as many test points as planned, none failed, no bail-out. */
  ok: boolean;
}

export type TapParse = { ok: true; summary: TapSummary } | { ok: false; reason: string };

const MAX_REASON = 200;

export function tapSummary(content: Uint8Array | string): TapParse {
  const size = typeof content === 'string' ? content.length : content.byteLength;
  if (size > KERNEL_LIMITS.maxReportBytes) return { ok: false, reason: `the report is larger than ${KERNEL_LIMITS.maxReportBytes} bytes` };
  const text = typeof content === 'string' ? content : decodeUtf8Lenient(content);
  const s = { planned: null as number | null, tests: 0, passed: 0, failed: 0, skipped: 0, todo: 0, bailed_out: false, bail_reason: null as string | null };

  for (const rawLine of text.split('\n')) {
    const line = rawLine.endsWith('\r') ? rawLine.slice(0, -1) : rawLine;
    if (/^bail out!/i.test(line)) {
      s.bailed_out = true;
      // Cut by code unit, then repaired, so facts never carry a lone surrogate (not canonicalisable)
      // nor a NUL (no receipt holds one: PostgreSQL cannot store it), shown as U+FFFD like bad bytes.
      s.bail_reason = line.slice('bail out!'.length).trim().slice(0, MAX_REASON).toWellFormed().replaceAll('\u0000', '\uFFFD');
      break;
    }
    const plan = /^1\.\.(\d{1,9})(?:\s|$)/.exec(line);
    if (plan !== null) {
      // A second plan is not TAP; the first one stands.
      s.planned ??= Number(plan[1]);
      continue;
    }
    const status = line.startsWith('ok') ? 'ok' : line.startsWith('not ok') ? 'not ok' : null;
    if (status === null) continue;
    const after = line[status.length];
    if (after !== undefined && after !== ' ' && after !== '\t') continue; // e.g. "okay"
    s.tests++;
    const directive = directiveOf(line);
    if (directive === 'skip') s.skipped++;
    else if (directive === 'todo') s.todo++;
    else if (status === 'ok') s.passed++;
    else s.failed++;
  }
  const ok = s.planned !== null && s.tests === s.planned && s.failed === 0 && !s.bailed_out;
  return { ok: true, summary: { ...s, ok } };
}

/** The directive after the first unescaped `#`, if it is SKIP or TODO (case-insensitive, as a prefix). */
function directiveOf(line: string): 'skip' | 'todo' | null {
  for (let k = 0; k < line.length; k++) {
    const c = line[k];
    if (c === '\\') {
      k++;
    } else if (c === '#') {
      const word = line.slice(k + 1, k + 40).trimStart().slice(0, 4).toLowerCase();
      return word === 'skip' ? 'skip' : word === 'todo' ? 'todo' : null;
    }
  }
  return null;
}

/** Sums several streams: `planned` is the sum only when every stream had a plan. */
export function sumTap(summaries: readonly TapSummary[]): TapSummary {
  const total: TapSummary = { planned: 0, tests: 0, passed: 0, failed: 0, skipped: 0, todo: 0, bailed_out: false, bail_reason: null, ok: true };
  for (const s of summaries) {
    total.planned = total.planned === null || s.planned === null ? null : total.planned + s.planned;
    total.tests += s.tests;
    total.passed += s.passed;
    total.failed += s.failed;
    total.skipped += s.skipped;
    total.todo += s.todo;
    if (s.bailed_out && !total.bailed_out) {
      total.bailed_out = true;
      total.bail_reason = s.bail_reason;
    }
    total.ok &&= s.ok;
  }
  if (summaries.length === 0) total.ok = false;
  return total;
}
