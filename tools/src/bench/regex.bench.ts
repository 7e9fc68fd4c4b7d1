import { pathToFileURL } from 'node:url';
import { compileSafeRegex, safeRegexTest } from '@cairn/kernel';
import { RE2JS } from 're2js';

/**
 * `npm run bench:regex`: the kernel's `matches` engine (libs/kernel/src/safe-regex.ts) beside
 * `re2js` (RE2 in JavaScript) and, as the baseline, V8's own RegExp, in the same run, on the
 * checks a run's spec makes (a summary line in a large log, a TAP failure, case-insensitive words,
 * many short texts) and on classic ReDoS patterns (where V8 is not run: it would not finish).
 * ADR 0016 records why the kernel keeps its engine.
 */

export interface RegexBenchCase {
  name: string;
  pattern: string;
  /** The texts searched, one `test` each. */
  texts: readonly string[];
  /** V8 backtracks exponentially on this one: not run. */
  hostile?: boolean;
}

export interface RegexBenchRow {
  name: string;
  pattern: string;
  chars: number;
  calls: number;
  /** Median milliseconds over the rounds, or null when not run. */
  ours: number | null;
  re2js: number | null;
  native: number | null;
  /** The engines that answered differently from ours, e.g. "re2js: true". */
  disagreements: string[];
}

const MiB = 1024 * 1024;

function repeatTo(chunk: string, chars: number): string {
  return chunk.repeat(Math.ceil(chars / chunk.length)).slice(0, chars);
}

export function regexBenchCases(scale = 1): RegexBenchCase[] {
  const log = repeatTo('2026-12-02T10:00:00Z INFO test_math.py::test_add PASSED in 0.001s\n', scale * MiB);
  const tap = repeatTo('ok 12 - adds two numbers\n# a comment line\n', scale * MiB);
  const short = Array.from({ length: Math.max(1, Math.round(10_000 * scale)) }, (_, k) => `step ${k}: exit 0 after ${k % 97} ms, ${k % 3} warnings`);
  return [
    { name: 'summary line at the end of a log', pattern: '(?m:^passed: [1-9]\\d* failed: 0$)', texts: [`${log}passed: 412 failed: 0\n`] },
    { name: 'no TAP failure in a report', pattern: '(?m:^not ok)', texts: [tap] },
    { name: 'case-insensitive words, absent', pattern: '(?i:\\b(error|fatal|panic)\\b)', texts: [log] },
    { name: 'many short texts', pattern: '^step \\d+: exit 0\\b.*\\b0 warnings$', texts: short },
    { name: 'ReDoS (a+)+$', pattern: '(a+)+$', texts: [`${'a'.repeat(Math.round(100_000 * scale))}!`], hostile: true },
    { name: 'ReDoS (a|a)*b', pattern: '(a|a)*b', texts: ['a'.repeat(Math.round(100_000 * scale))], hostile: true },
    { name: 'ReDoS (\\w+\\s?)+$', pattern: '(\\w+\\s?)+$', texts: [`${'word '.repeat(Math.round(20_000 * scale))}!`], hostile: true },
  ];
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Times `test` over every text `rounds` times; returns the median and the answer of the first text. */
function time(test: (text: string) => boolean, texts: readonly string[], rounds: number): { ms: number; answer: boolean } {
  const samples: number[] = [];
  let answer = false;
  for (let round = 0; round < rounds; round++) {
    const started = performance.now();
    for (let k = 0; k < texts.length; k++) {
      const matched = test(texts[k]!);
      if (k === 0) answer = matched;
    }
    samples.push(performance.now() - started);
  }
  return { ms: median(samples), answer };
}

export function runRegexBench(options: { scale?: number; rounds?: number } = {}): RegexBenchRow[] {
  const rounds = options.rounds ?? 5;
  return regexBenchCases(options.scale ?? 1).map((benchCase) => {
    const compiled = compileSafeRegex(benchCase.pattern);
    if (!compiled.ok) throw new Error(`the kernel refuses ${benchCase.pattern}: ${compiled.reason}`);
    const re2 = RE2JS.compile(RE2JS.translateRegExp(benchCase.pattern));
    const native = new RegExp(benchCase.pattern, 'u');
    const ours = time((text) => {
      const result = safeRegexTest(compiled.regex, text);
      if (!result.ok) throw new Error(`the kernel gave up on ${benchCase.pattern}: ${result.reason}`);
      return result.matched;
    }, benchCase.texts, rounds);
    const theirs = time((text) => re2.test(text), benchCase.texts, rounds);
    const baseline = benchCase.hostile === true ? null : time((text) => native.test(text), benchCase.texts, rounds);
    const disagreements: string[] = [];
    if (theirs.answer !== ours.answer) disagreements.push(`re2js: ${theirs.answer}`);
    if (baseline !== null && baseline.answer !== ours.answer) disagreements.push(`RegExp: ${baseline.answer}`);
    return {
      name: benchCase.name,
      pattern: benchCase.pattern,
      chars: benchCase.texts.reduce((sum, text) => sum + text.length, 0),
      calls: benchCase.texts.length,
      ours: ours.ms,
      re2js: theirs.ms,
      native: baseline?.ms ?? null,
      disagreements,
    };
  });
}

export function formatRegexBench(rows: readonly RegexBenchRow[]): string {
  const ms = (value: number | null) => (value === null ? 'not run'.padStart(10) : `${value.toFixed(1)} ms`.padStart(10));
  const ratio = (a: number | null, b: number | null) => (a === null || b === null || b === 0 ? '' : `${(a / b).toFixed(2)}×`);
  const lines = [
    'regex: the kernel engine (ours) beside re2js and V8 RegExp (baseline), median of the rounds, same run',
    `${'case'.padEnd(36)}${'chars'.padStart(10)}${'calls'.padStart(7)}${'ours'.padStart(10)}${'re2js'.padStart(10)}${'RegExp'.padStart(10)}  ours/re2js`,
  ];
  for (const row of rows) {
    lines.push(
      `${row.name.padEnd(36)}${String(row.chars).padStart(10)}${String(row.calls).padStart(7)}${ms(row.ours)}${ms(row.re2js)}${ms(row.native)}  ${ratio(row.ours, row.re2js)}` +
        (row.disagreements.length > 0 ? `   answers differ from ours: ${row.disagreements.join(', ')}` : ''),
    );
  }
  return lines.join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.stdout.write(`${formatRegexBench(runRegexBench())}\n`);
}
