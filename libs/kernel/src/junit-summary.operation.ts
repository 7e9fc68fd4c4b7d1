import { KERNEL_LIMITS } from './kernel-limits.constants.js';
import { decodeUtf8Lenient } from './text.operation.js';
import { scanXml } from './xml-scanner.js';

/**
 * Counts from one JUnit XML report.
 *
 * `<testcase>` elements are the truth when there are any: each counts once, as a failure if it has
 * a `<failure>` child, else an error if it has an `<error>` child, else skipped if it has a
 * `<skipped>` child, else passed (Surefire's `<flakyFailure>`/`<rerunFailure>` are not failures: the
 * test passed on a rerun). Counting elements rather than trusting `tests="…"` attributes makes
 * nested suites and aggregate roots impossible to double-count. A report with no `<testcase>` at all
 * falls back to the attributes of its outermost suites (or of the `<testsuites>` root).
 */
export interface JunitSummary {
  tests: number;
  passed: number;
  /** failures + errors: the tests that ran and did not pass. */
  failed: number;
  failures: number;
  errors: number;
  skipped: number;
  /** `<testsuite>` elements seen, at any depth. */
  suites: number;
  /** False when the document was truncated or had junk the scanner skipped. */
  well_formed: boolean;
}

export type JunitParse = { ok: true; summary: JunitSummary } | { ok: false; reason: string };

type Outcome = 'passed' | 'failure' | 'error' | 'skipped';
const RANK: Readonly<Record<Outcome, number>> = { passed: 0, skipped: 1, error: 2, failure: 3 };

/** Summarises a JUnit report; `ok: false` when the document's root is not `testsuites`/`testsuite`. */
export function junitSummary(content: Uint8Array | string): JunitParse {
  const size = typeof content === 'string' ? content.length : content.byteLength;
  if (size > KERNEL_LIMITS.maxReportBytes) return { ok: false, reason: `the report is larger than ${KERNEL_LIMITS.maxReportBytes} bytes` };
  const text = typeof content === 'string' ? content : decodeUtf8Lenient(content);
  const scan = scanXml(text);

  const stack: string[] = [];
  // How many of each element are open, so a stray end tag costs O(1) and not a scan of the stack.
  const open = new Map<string, number>();
  let root: string | null = null;
  const counted = { tests: 0, failures: 0, errors: 0, skipped: 0 };
  const fromAttributes = { tests: 0, failures: 0, errors: 0, skipped: 0 };
  let rootAttributes: ReadonlyMap<string, string> | null = null;
  let suites = 0;
  let outermostSuites = 0;
  // Outcome of each open <testcase>, innermost last.
  const openCases: { depth: number; outcome: Outcome }[] = [];

  const closeCase = (): void => {
    const done = openCases.pop();
    if (done === undefined) return;
    counted.tests++;
    if (done.outcome === 'failure') counted.failures++;
    else if (done.outcome === 'error') counted.errors++;
    else if (done.outcome === 'skipped') counted.skipped++;
  };

  for (const tag of scan.tags) {
    if (root === null) {
      if (tag.kind === 'end') continue;
      root = tag.name;
      if (root !== 'testsuites' && root !== 'testsuite') return { ok: false, reason: `the root element is <${root}>, not a JUnit report` };
      rootAttributes = tag.attributes;
    }
    if (tag.kind === 'start') {
      if (tag.name === 'testsuite') {
        suites++;
        if ((open.get('testsuite') ?? 0) === 0) {
          outermostSuites++;
          addCounts(fromAttributes, tag.attributes);
        }
      }
      const parent = stack[stack.length - 1];
      const openCase = openCases[openCases.length - 1];
      if (parent === 'testcase' && openCase !== undefined && openCase.depth === stack.length - 1) {
        const outcome = outcomeOf(tag.name);
        if (outcome !== null && RANK[outcome] > RANK[openCase.outcome]) openCase.outcome = outcome;
      }
      if (tag.name === 'testcase') openCases.push({ depth: stack.length, outcome: 'passed' });
      if (tag.selfClosing) {
        if (tag.name === 'testcase') closeCase();
      } else {
        stack.push(tag.name);
        open.set(tag.name, (open.get(tag.name) ?? 0) + 1);
      }
    } else {
      // Tolerant close: pop to the matching open element; a stray end tag is ignored.
      if ((open.get(tag.name) ?? 0) === 0) continue;
      let closed: string;
      do {
        closed = stack.pop()!;
        open.set(closed, open.get(closed)! - 1);
        const openCase = openCases[openCases.length - 1];
        if (openCase !== undefined && openCase.depth === stack.length) closeCase();
      } while (closed !== tag.name);
    }
  }
  if (root === null) return { ok: false, reason: 'no root element' };
  // A truncated report still counts the test cases it started.
  while (openCases.length > 0) closeCase();

  let counts = counted;
  if (counted.tests === 0) {
    counts = fromAttributes;
    if (outermostSuites === 0 && rootAttributes !== null) {
      counts = { tests: 0, failures: 0, errors: 0, skipped: 0 };
      addCounts(counts, rootAttributes);
    }
  }
  const failed = counts.failures + counts.errors;
  return {
    ok: true,
    summary: {
      tests: counts.tests,
      passed: Math.max(0, counts.tests - failed - counts.skipped),
      failed,
      failures: counts.failures,
      errors: counts.errors,
      skipped: counts.skipped,
      suites,
      well_formed: scan.wellFormed && stack.length === 0,
    },
  };
}

function outcomeOf(name: string): Outcome | null {
  switch (name) {
    case 'failure':
      return 'failure';
    case 'error':
      return 'error';
    case 'skipped':
      return 'skipped';
    default:
      return null;
  }
}

/** Adds a suite's `tests`/`failures`/`errors`/`skipped` (or `disabled`) attributes; junk counts as 0. */
function addCounts(into: { tests: number; failures: number; errors: number; skipped: number }, attributes: ReadonlyMap<string, string>): void {
  into.tests += count(attributes.get('tests'));
  into.failures += count(attributes.get('failures'));
  into.errors += count(attributes.get('errors'));
  into.skipped += count(attributes.get('skipped') ?? attributes.get('skips') ?? attributes.get('disabled'));
}

function count(value: string | undefined): number {
  if (value === undefined || !/^\s*\d{1,9}\s*$/.test(value)) return 0;
  return Number(value.trim());
}

/** Sums several reports' summaries (facts carry one JUnit summary per run). */
export function sumJunit(summaries: readonly JunitSummary[]): JunitSummary {
  const total: JunitSummary = { tests: 0, passed: 0, failed: 0, failures: 0, errors: 0, skipped: 0, suites: 0, well_formed: true };
  for (const s of summaries) {
    total.tests += s.tests;
    total.passed += s.passed;
    total.failed += s.failed;
    total.failures += s.failures;
    total.errors += s.errors;
    total.skipped += s.skipped;
    total.suites += s.suites;
    total.well_formed &&= s.well_formed;
  }
  return total;
}
