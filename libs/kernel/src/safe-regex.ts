/*
 * A linear-time regular expression matcher for patterns that come from a run's spec.
 *
 * JavaScript's own RegExp backtracks, so an untrusted pattern such as `(a+)+$` can pin a CPU for
 * hours; Node has no RE2. This compiles the usual subset of JavaScript's `u`-mode syntax to an NFA and
 * runs it as a Pike VM (Thompson simulation): work is O(input length x program size) whatever the
 * pattern, and a step budget caps it absolutely. Anything outside the subset — back-references,
 * lookaround, `\p{…}` — is refused rather than approximated, so every pattern this accepts matches
 * exactly where JavaScript's `new RegExp(pattern, 'u')` should (V8 itself strays in two corners:
 * it lets `\B` match inside a surrogate pair, and its modifier groups `(?i:…)` miss some Unicode
 * case foldings such as ſ ~ S; this engine follows the specification in both).
 *
 * Supported: literals; `.`; `[…]`/`[^…]` with ranges; `\d \D \w \W \s \S`; `\b \B`; `^ $`;
 * `\n \r \t \f \v \0 \xHH \uHHHH \u{…} \cX`; escaped syntax characters; `(…)`, `(?:…)`,
 * `(?<name>…)` (captures are not reported); modifier groups `(?i:…)`, `(?-i:…)`, `(?ims-ims:…)`;
 * `|`; `* + ? {n} {n,} {n,m}` and their lazy forms (laziness cannot change whether there is a match).
 */

export const SAFE_REGEX_LIMITS = Object.freeze({
  /** Longest pattern accepted, in UTF-16 code units. */
  maxPatternLength: 1024,
  /** Deepest group nesting, so the recursive-descent parser cannot exhaust the stack. */
  maxNesting: 64,
  /** Largest `{n,m}` bound. */
  maxRepeat: 1000,
  /** Most NFA instructions after expanding counted repeats. */
  maxProgramSize: 20_000,
  /** Longest input searched, in UTF-16 code units (16 Mi). */
  maxInputLength: 16 * 1024 * 1024,
  /** Most VM steps (instruction visits) one search may take, about 0.4 s here; past it the search gives up. */
  maxSteps: 20_000_000,
});

type Flags = { readonly i: boolean; readonly m: boolean; readonly s: boolean };
type AssertKind = 'bol' | 'eol' | 'word' | 'not_word';

/** A set of code points: sorted, disjoint, inclusive `[lo, hi]` pairs, flattened. */
type Ranges = readonly number[];

type Node =
  | { kind: 'empty' }
  | { kind: 'chars'; ranges: Ranges; negate: boolean; fold: boolean }
  | { kind: 'assert'; what: AssertKind; multiline: boolean; ignoreCase: boolean }
  | { kind: 'concat'; items: Node[] }
  | { kind: 'alt'; items: Node[] }
  | { kind: 'repeat'; node: Node; min: number; max: number | null };

type Inst =
  | { op: 'chars'; ranges: Ranges; negate: boolean; fold: boolean }
  | { op: 'split'; x: number; y: number }
  | { op: 'jump'; x: number }
  | { op: 'assert'; what: AssertKind; multiline: boolean; ignoreCase: boolean }
  | { op: 'match' };

/** A compiled pattern. Opaque: use `safeRegexTest`. */
export interface SafeRegex {
  readonly pattern: string;
  readonly program: readonly Inst[];
  /** Starts with a non-multiline `^`: no need to start a thread past position 0. */
  readonly anchored: boolean;
  /** Literal runs every match must contain: a text without one of them cannot match. */
  readonly required: readonly string[];
}

export type SafeRegexCompilation = { ok: true; regex: SafeRegex } | { ok: false; reason: string };
export type SafeRegexResult = { ok: true; matched: boolean } | { ok: false; reason: string };

class PatternError extends Error {}

const MAX_CODE_POINT = 0x10ffff;
const LINE_TERMINATORS: Ranges = [0x0a, 0x0a, 0x0d, 0x0d, 0x2028, 0x2029];
const DIGIT: Ranges = [0x30, 0x39];
const WORD: Ranges = [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a];
// Under `iu`, \w, \W, \b and \B also treat 'ſ' (U+017F) and 'K' (U+212A) as word characters: they fold to s and k.
const WORD_IGNORE_CASE: Ranges = [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a, 0x17f, 0x17f, 0x212a, 0x212a];
// ECMAScript WhiteSpace and LineTerminator.
const SPACE: Ranges = normalise([
  0x09, 0x0d, 0x20, 0x20, 0xa0, 0xa0, 0x1680, 0x1680, 0x2000, 0x200a, 0x2028, 0x2029, 0x202f, 0x202f, 0x205f, 0x205f, 0x3000, 0x3000,
  0xfeff, 0xfeff,
]);
const SYNTAX_CHARACTERS = '^$\\.*+?()[]{}|/';

export function compileSafeRegex(pattern: string): SafeRegexCompilation {
  if (pattern.length > SAFE_REGEX_LIMITS.maxPatternLength) {
    return { ok: false, reason: `the pattern is longer than ${SAFE_REGEX_LIMITS.maxPatternLength} characters` };
  }
  try {
    const node = new Parser(pattern).parse();
    const size = programSize(node) + 1;
    if (size > SAFE_REGEX_LIMITS.maxProgramSize) {
      return { ok: false, reason: `the pattern expands to ${size} instructions, more than ${SAFE_REGEX_LIMITS.maxProgramSize}` };
    }
    const program: Inst[] = [];
    emit(node, program);
    program.push({ op: 'match' });
    return { ok: true, regex: { pattern, program, anchored: startsAnchored(node), required: requiredLiterals(node) } };
  } catch (error) {
    if (error instanceof PatternError) return { ok: false, reason: error.message };
    throw error;
  }
}

/** Whether `regex` matches anywhere in `text` (like `RegExp.prototype.test`), within the step budget. */
export function safeRegexTest(regex: SafeRegex, text: string, maxSteps: number = SAFE_REGEX_LIMITS.maxSteps): SafeRegexResult {
  if (text.length > SAFE_REGEX_LIMITS.maxInputLength) {
    return { ok: false, reason: `the text is longer than ${SAFE_REGEX_LIMITS.maxInputLength} characters` };
  }
  // A cheap linear pre-check (String.prototype.includes) before the VM.
  if (!regex.required.every((literal) => text.includes(literal))) return { ok: true, matched: false };
  const budget = Math.min(maxSteps, SAFE_REGEX_LIMITS.maxSteps);
  const matched = run(regex, text, budget);
  return matched === null ? { ok: false, reason: `the search took more than ${budget} steps` } : { ok: true, matched };
}

/** Compiles and tests in one call; a pattern outside the subset is `{ ok: false }`, never a throw. */
export function regexMatch(text: string, pattern: string): SafeRegexResult {
  const compiled = compileSafeRegex(pattern);
  return compiled.ok ? safeRegexTest(compiled.regex, text) : compiled;
}

// ---------------------------------------------------------------------------------------------
// Parsing

class Parser {
  private pos = 0;
  private depth = 0;
  private readonly src: string;

  constructor(src: string) {
    this.src = src;
  }

  parse(): Node {
    const node = this.alternation({ i: false, m: false, s: false });
    if (this.pos < this.src.length) throw this.error(`unmatched ')'`);
    return node;
  }

  private error(problem: string): PatternError {
    return new PatternError(`${problem} at position ${this.pos}`);
  }

  private peek(offset = 0): string | undefined {
    return this.src[this.pos + offset];
  }

  private alternation(flags: Flags): Node {
    const items = [this.concatenation(flags)];
    while (this.peek() === '|') {
      this.pos++;
      items.push(this.concatenation(flags));
    }
    return items.length === 1 ? items[0]! : { kind: 'alt', items };
  }

  private concatenation(flags: Flags): Node {
    const items: Node[] = [];
    while (this.pos < this.src.length && this.peek() !== '|' && this.peek() !== ')') {
      items.push(this.quantified(flags));
    }
    if (items.length === 0) return { kind: 'empty' };
    return items.length === 1 ? items[0]! : { kind: 'concat', items };
  }

  private quantified(flags: Flags): Node {
    const grouped = this.peek() === '(';
    const atom = this.atom(flags);
    const bounds = this.quantifier();
    if (bounds === null) return atom;
    // JavaScript refuses `^*` or `\b+`, but accepts a quantified group such as `(\b){2}`.
    if (atom.kind === 'assert' && !grouped) throw this.error('an assertion cannot be repeated');
    if (this.peek() === '?') this.pos++; // lazy: same set of matches
    if (this.quantifierFollows()) throw this.error('nothing to repeat');
    return { kind: 'repeat', node: atom, min: bounds.min, max: bounds.max };
  }

  private quantifierFollows(): boolean {
    const c = this.peek();
    return c === '*' || c === '+' || c === '?' || (c === '{' && this.braceQuantifier(false) !== null);
  }

  private quantifier(): { min: number; max: number | null } | null {
    switch (this.peek()) {
      case '*':
        this.pos++;
        return { min: 0, max: null };
      case '+':
        this.pos++;
        return { min: 1, max: null };
      case '?':
        this.pos++;
        return { min: 0, max: 1 };
      case '{': {
        const bounds = this.braceQuantifier(true);
        if (bounds === null) throw this.error(`a lone '{'`);
        return bounds;
      }
      default:
        return null;
    }
  }

  /** `{n}`, `{n,}`, `{n,m}`; consumes it only when `consume`. */
  private braceQuantifier(consume: boolean): { min: number; max: number | null } | null {
    const match = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.pos, this.pos + 24));
    if (match === null) return null;
    const min = Number(match[1]);
    const max = match[2] === undefined ? min : match[3] === '' ? null : Number(match[3]);
    if (min > SAFE_REGEX_LIMITS.maxRepeat || (max !== null && max > SAFE_REGEX_LIMITS.maxRepeat)) {
      throw this.error(`a repeat bound above ${SAFE_REGEX_LIMITS.maxRepeat}`);
    }
    if (max !== null && max < min) throw this.error('numbers out of order in {} quantifier');
    if (consume) this.pos += match[0].length;
    return { min, max };
  }

  private atom(flags: Flags): Node {
    const c = this.peek()!;
    switch (c) {
      case '(':
        return this.group(flags);
      case '[':
        return this.characterClass(flags);
      case '.':
        this.pos++;
        return { kind: 'chars', ranges: flags.s ? [] : LINE_TERMINATORS, negate: true, fold: false };
      case '^':
        this.pos++;
        return { kind: 'assert', what: 'bol', multiline: flags.m, ignoreCase: false };
      case '$':
        this.pos++;
        return { kind: 'assert', what: 'eol', multiline: flags.m, ignoreCase: false };
      case '\\':
        return this.atomEscape(flags);
      case '*':
      case '+':
      case '?':
        throw this.error('nothing to repeat');
      case '{':
        throw this.error(this.braceQuantifier(false) === null ? `a lone '{'` : 'nothing to repeat');
      case '}':
      case ']':
        throw this.error(`a lone '${c}'`);
      default: {
        const cp = this.src.codePointAt(this.pos)!;
        this.pos += cp > 0xffff ? 2 : 1;
        return literal(cp, flags);
      }
    }
  }

  private group(flags: Flags): Node {
    this.pos++; // (
    let inner = flags;
    if (this.peek() === '?') {
      const rest = this.src.slice(this.pos + 1, this.pos + 1 + 64);
      if (rest.startsWith(':')) {
        this.pos += 2;
      } else if (rest.startsWith('=') || rest.startsWith('!') || rest.startsWith('<=') || rest.startsWith('<!')) {
        throw this.error('lookaround is not supported');
      } else if (rest.startsWith('<')) {
        const name = /^<([A-Za-z_$][A-Za-z0-9_$]*)>/.exec(rest);
        if (name === null) throw this.error('an invalid group name');
        this.pos += 1 + name[0].length;
      } else {
        const modifiers = /^([ims]*)(?:-([ims]*))?:/.exec(rest);
        if (modifiers === null) throw this.error('an invalid group');
        const on = modifiers[1] ?? '';
        const off = modifiers[2] ?? '';
        if (on === '' && off === '' && modifiers[0] !== ':') throw this.error('an empty modifier group');
        if (new Set(on + off).size !== on.length + off.length) throw this.error('a repeated flag in a modifier group');
        inner = {
          i: on.includes('i') ? true : off.includes('i') ? false : flags.i,
          m: on.includes('m') ? true : off.includes('m') ? false : flags.m,
          s: on.includes('s') ? true : off.includes('s') ? false : flags.s,
        };
        this.pos += 1 + modifiers[0].length;
      }
    }
    if (++this.depth > SAFE_REGEX_LIMITS.maxNesting) throw this.error(`groups nested deeper than ${SAFE_REGEX_LIMITS.maxNesting}`);
    const node = this.alternation(inner);
    this.depth--;
    if (this.peek() !== ')') throw this.error(`an unterminated group`);
    this.pos++;
    return node;
  }

  private atomEscape(flags: Flags): Node {
    this.pos++; // backslash
    const c = this.peek();
    if (c === undefined) throw this.error('\\ at end of pattern');
    switch (c) {
      case 'b':
      case 'B':
        this.pos++;
        return { kind: 'assert', what: c === 'b' ? 'word' : 'not_word', multiline: false, ignoreCase: flags.i };
      case 'd':
      case 'D':
      case 'w':
      case 'W':
      case 's':
      case 'S':
        this.pos++;
        return { kind: 'chars', ranges: classEscape(c, flags.i), negate: false, fold: flags.i };
      case 'k':
        throw this.error('named back-references are not supported');
      case 'p':
      case 'P':
        throw this.error('unicode property escapes are not supported');
      default:
        if (c >= '1' && c <= '9') throw this.error('back-references are not supported');
        return literal(this.characterEscape(false), flags);
    }
  }

  /** An escape that stands for one code point (after the backslash). */
  private characterEscape(inClass: boolean): number {
    const c = this.peek()!;
    this.pos++;
    switch (c) {
      case 'n':
        return 0x0a;
      case 'r':
        return 0x0d;
      case 't':
        return 0x09;
      case 'f':
        return 0x0c;
      case 'v':
        return 0x0b;
      case '0': {
        const next = this.peek();
        if (next !== undefined && next >= '0' && next <= '9') throw this.error('an octal escape');
        return 0;
      }
      case 'c': {
        const letter = this.peek();
        if (letter === undefined || !/^[A-Za-z]$/.test(letter)) throw this.error('an invalid \\c escape');
        this.pos++;
        return letter.charCodeAt(0) % 32;
      }
      case 'x': {
        const hex = /^[0-9A-Fa-f]{2}/.exec(this.src.slice(this.pos, this.pos + 2));
        if (hex === null) throw this.error('an invalid \\x escape');
        this.pos += 2;
        return parseInt(hex[0], 16);
      }
      case 'u':
        return this.unicodeEscape();
      case '-':
        if (inClass) return 0x2d;
        throw this.error('an invalid escape \\-');
      default:
        if (SYNTAX_CHARACTERS.includes(c)) return c.charCodeAt(0);
        throw this.error(`an invalid escape \\${c}`);
    }
  }

  private unicodeEscape(): number {
    if (this.peek() === '{') {
      const braced = /^\{([0-9A-Fa-f]{1,8})\}/.exec(this.src.slice(this.pos, this.pos + 10));
      const cp = braced === null ? NaN : parseInt(braced[1]!, 16);
      if (braced === null || cp > MAX_CODE_POINT) throw this.error('an invalid \\u{…} escape');
      this.pos += braced[0].length;
      return cp;
    }
    const hex = /^[0-9A-Fa-f]{4}/.exec(this.src.slice(this.pos, this.pos + 4));
    if (hex === null) throw this.error('an invalid \\u escape');
    this.pos += 4;
    const unit = parseInt(hex[0], 16);
    // In u-mode an escaped surrogate pair is one code point.
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const low = /^\\u(d[c-f][0-9a-f]{2})/i.exec(this.src.slice(this.pos, this.pos + 6));
      if (low !== null) {
        this.pos += 6;
        return 0x10000 + ((unit - 0xd800) << 10) + (parseInt(low[1]!, 16) - 0xdc00);
      }
    }
    return unit;
  }

  private characterClass(flags: Flags): Node {
    this.pos++; // [
    let negate = false;
    if (this.peek() === '^') {
      negate = true;
      this.pos++;
    }
    const parts: number[] = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined) throw this.error('an unterminated character class');
      if (c === ']') {
        this.pos++;
        break;
      }
      const from = this.classAtom(flags);
      if (this.peek() === '-' && this.peek(1) !== ']' && this.peek(1) !== undefined) {
        this.pos++;
        const to = this.classAtom(flags);
        if (typeof from !== 'number' || typeof to !== 'number') throw this.error('a class escape in a range');
        if (to < from) throw this.error('a character class range out of order');
        parts.push(from, to);
      } else if (typeof from === 'number') {
        parts.push(from, from);
      } else {
        parts.push(...from);
      }
    }
    return { kind: 'chars', ranges: normalise(parts), negate, fold: flags.i };
  }

  /** One code point, or a set for `\d`-style escapes. */
  private classAtom(flags: Flags): number | Ranges {
    const c = this.peek()!;
    if (c !== '\\') {
      const cp = this.src.codePointAt(this.pos)!;
      this.pos += cp > 0xffff ? 2 : 1;
      return cp;
    }
    this.pos++;
    const e = this.peek();
    if (e === undefined) throw this.error('\\ at end of pattern');
    if ('dDwWsS'.includes(e)) {
      this.pos++;
      return classEscape(e, flags.i);
    }
    if (e === 'b') {
      this.pos++;
      return 0x08;
    }
    if (e === 'p' || e === 'P') throw this.error('unicode property escapes are not supported');
    if (e >= '1' && e <= '9') throw this.error('an invalid class escape');
    return this.characterEscape(true);
  }
}

function literal(cp: number, flags: Flags): Node {
  return { kind: 'chars', ranges: [cp, cp], negate: false, fold: flags.i };
}

function classEscape(c: string, ignoreCase: boolean): Ranges {
  const word = ignoreCase ? WORD_IGNORE_CASE : WORD;
  switch (c) {
    case 'd':
      return DIGIT;
    case 'D':
      return complement(DIGIT);
    case 'w':
      return word;
    case 'W':
      return complement(word);
    case 's':
      return SPACE;
    default:
      return complement(SPACE);
  }
}

/** Sorts and merges `[lo, hi]` pairs. */
function normalise(pairs: readonly number[]): number[] {
  const ranges: [number, number][] = [];
  for (let k = 0; k < pairs.length; k += 2) ranges.push([pairs[k]!, pairs[k + 1]!]);
  ranges.sort((a, b) => a[0] - b[0]);
  const out: number[] = [];
  for (const [lo, hi] of ranges) {
    const last = out.length - 1;
    if (out.length > 0 && lo <= out[last]! + 1) out[last] = Math.max(out[last]!, hi);
    else out.push(lo, hi);
  }
  return out;
}

function complement(ranges: Ranges): number[] {
  const out: number[] = [];
  let next = 0;
  for (let k = 0; k < ranges.length; k += 2) {
    if (ranges[k]! > next) out.push(next, ranges[k]! - 1);
    next = ranges[k + 1]! + 1;
  }
  if (next <= MAX_CODE_POINT) out.push(next, MAX_CODE_POINT);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Compiling

function programSize(node: Node): number {
  switch (node.kind) {
    case 'empty':
      return 0;
    case 'chars':
    case 'assert':
      return 1;
    case 'concat':
      return node.items.reduce((sum, item) => sum + programSize(item), 0);
    case 'alt':
      return node.items.reduce((sum, item) => sum + programSize(item) + 2, 0);
    case 'repeat': {
      const body = programSize(node.node);
      const copies = node.max === null ? node.min + 1 : node.max;
      return copies * (body + 2);
    }
  }
}

function emit(node: Node, program: Inst[]): void {
  switch (node.kind) {
    case 'empty':
      return;
    case 'chars':
      program.push({ op: 'chars', ranges: node.ranges, negate: node.negate, fold: node.fold });
      return;
    case 'assert':
      program.push({ op: 'assert', what: node.what, multiline: node.multiline, ignoreCase: node.ignoreCase });
      return;
    case 'concat':
      for (const item of node.items) emit(item, program);
      return;
    case 'alt': {
      const jumps: { op: 'jump'; x: number }[] = [];
      node.items.forEach((item, k) => {
        const last = k === node.items.length - 1;
        const split = { op: 'split' as const, x: program.length + 1, y: -1 };
        if (!last) program.push(split);
        emit(item, program);
        if (!last) {
          const jump = { op: 'jump' as const, x: -1 };
          program.push(jump);
          jumps.push(jump);
          split.y = program.length;
        }
      });
      for (const jump of jumps) jump.x = program.length;
      return;
    }
    case 'repeat': {
      for (let k = 0; k < node.min; k++) emit(node.node, program);
      if (node.max === null) {
        const split = { op: 'split' as const, x: program.length + 1, y: -1 };
        const loop = program.length;
        program.push(split);
        emit(node.node, program);
        program.push({ op: 'jump', x: loop });
        split.y = program.length;
        return;
      }
      const splits: { op: 'split'; x: number; y: number }[] = [];
      for (let k = node.min; k < node.max; k++) {
        const split = { op: 'split' as const, x: program.length + 1, y: -1 };
        program.push(split);
        splits.push(split);
        emit(node.node, program);
      }
      for (const split of splits) split.y = program.length;
      return;
    }
  }
}

function startsAnchored(node: Node): boolean {
  const first = node.kind === 'concat' ? node.items[0] : node;
  return first !== undefined && first.kind === 'assert' && first.what === 'bol' && !first.multiline;
}

/** Runs of case-sensitive single characters at the top level of a pattern that has no top-level `|`. */
function requiredLiterals(node: Node): string[] {
  const items = node.kind === 'concat' ? node.items : [node];
  const runs: string[] = [];
  let current = '';
  for (const item of items) {
    if (item.kind === 'chars' && !item.negate && !item.fold && item.ranges.length === 2 && item.ranges[0] === item.ranges[1]) {
      current += String.fromCodePoint(item.ranges[0]!);
    } else {
      if (current !== '') runs.push(current);
      current = '';
    }
  }
  if (current !== '') runs.push(current);
  return runs;
}

// ---------------------------------------------------------------------------------------------
// Running: a Pike VM without captures. Each thread list holds each pc at most once per position.

function run(regex: SafeRegex, text: string, maxSteps: number): boolean | null {
  const program = regex.program;
  const size = program.length;
  let current = new Int32Array(size);
  let next = new Int32Array(size);
  let currentCount = 0;
  let nextCount = 0;
  const mark = new Int32Array(size);
  const stack = new Int32Array(size);
  let generation = 1;
  let steps = 0;
  let matched = false;

  /** Follows jumps, splits and assertions from `pc` at `pos`; collects char-consuming threads. */
  const add = (list: Int32Array, count: number, pc: number, pos: number): number => {
    if (mark[pc] === generation) return count;
    mark[pc] = generation;
    let top = 0;
    stack[top++] = pc;
    while (top > 0) {
      const at = stack[--top]!;
      steps++;
      const inst = program[at]!;
      switch (inst.op) {
        case 'chars':
          list[count++] = at;
          break;
        case 'match':
          matched = true;
          break;
        case 'jump':
          if (mark[inst.x] !== generation) {
            mark[inst.x] = generation;
            stack[top++] = inst.x;
          }
          break;
        case 'split':
          // Pushed y first so x is explored first; the order does not change the answer.
          if (mark[inst.y] !== generation) {
            mark[inst.y] = generation;
            stack[top++] = inst.y;
          }
          if (mark[inst.x] !== generation) {
            mark[inst.x] = generation;
            stack[top++] = inst.x;
          }
          break;
        case 'assert':
          if (assertionHolds(inst, text, pos) && mark[at + 1] !== generation) {
            mark[at + 1] = generation;
            stack[top++] = at + 1;
          }
          break;
      }
    }
    return count;
  };

  let pos = 0;
  for (;;) {
    if (pos === 0 || !regex.anchored) currentCount = add(current, currentCount, 0, pos);
    if (matched) return true;
    if (steps > maxSteps) return null;
    if (pos >= text.length || (currentCount === 0 && regex.anchored)) return false;
    const cp = text.codePointAt(pos)!;
    const after = pos + (cp > 0xffff ? 2 : 1);
    generation++;
    nextCount = 0;
    for (let k = 0; k < currentCount; k++) {
      const at = current[k]!;
      const inst = program[at] as Extract<Inst, { op: 'chars' }>;
      steps++;
      if (charsMatch(inst, cp)) nextCount = add(next, nextCount, at + 1, after);
      if (matched) return true;
    }
    [current, next] = [next, current];
    currentCount = nextCount;
    pos = after;
  }
}

function inRanges(ranges: Ranges, cp: number): boolean {
  // Binary search over the pairs.
  let lo = 0;
  let hi = ranges.length / 2 - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (cp < ranges[2 * mid]!) hi = mid - 1;
    else if (cp > ranges[2 * mid + 1]!) lo = mid + 1;
    else return true;
  }
  return false;
}

function charsMatch(inst: { ranges: Ranges; negate: boolean; fold: boolean }, cp: number): boolean {
  let hit = inRanges(inst.ranges, cp);
  if (!hit && inst.fold) {
    for (const other of caseClass(cp)) {
      if (other !== cp && inRanges(inst.ranges, other)) {
        hit = true;
        break;
      }
    }
  }
  return hit !== inst.negate;
}

/*
 * Case-insensitive matching compares canonical forms, like ECMAScript's Canonicalize for `iu`
 * (simple case folding): two characters match when they fold alike. The fold is approximated by
 * toLowerCase(toUpperCase(c)) over one-to-one mappings, which gives the same classes as
 * CaseFolding.txt's simple foldings (ſ ~ s ~ S, K ~ k ~ K, ẞ ~ ß) except for 'ı' (U+0131), which
 * folds to nothing else. A class lists every code point that folds to the same form; the table is
 * built once, on first use, over the planes that have case mappings.
 */
function simpleFold(cp: number): number {
  if (cp === 0x131) return cp;
  const upper = oneCodePoint(String.fromCodePoint(cp).toUpperCase()) ?? cp;
  return oneCodePoint(String.fromCodePoint(upper).toLowerCase()) ?? upper;
}

function oneCodePoint(s: string): number | null {
  const cp = s.codePointAt(0);
  return cp !== undefined && s.length === (cp > 0xffff ? 2 : 1) ? cp : null;
}

/** Code point → every code point that folds alike (only for code points that have others). */
let caseClasses: Map<number, readonly number[]> | null = null;

function caseClass(cp: number): readonly number[] {
  if (caseClasses === null) {
    const byFold = new Map<number, number[]>();
    for (let c = 0; c <= 0x1ffff; c++) {
      if (c >= 0xd800 && c <= 0xdfff) continue;
      const folded = simpleFold(c);
      if (folded === c) continue;
      let members = byFold.get(folded);
      if (members === undefined) byFold.set(folded, (members = [folded]));
      members.push(c);
    }
    caseClasses = new Map();
    for (const members of byFold.values()) for (const member of members) caseClasses.set(member, members);
  }
  return caseClasses.get(cp) ?? [cp];
}

function isWordAt(text: string, pos: number, ignoreCase: boolean): boolean {
  if (pos < 0 || pos >= text.length) return false;
  return inRanges(ignoreCase ? WORD_IGNORE_CASE : WORD, text.charCodeAt(pos));
}

function isLineTerminatorAt(text: string, pos: number): boolean {
  if (pos < 0 || pos >= text.length) return false;
  return inRanges(LINE_TERMINATORS, text.charCodeAt(pos));
}

function assertionHolds(inst: { what: AssertKind; multiline: boolean; ignoreCase: boolean }, text: string, pos: number): boolean {
  const { multiline, ignoreCase } = inst;
  switch (inst.what) {
    case 'bol':
      return pos === 0 || (multiline && isLineTerminatorAt(text, pos - 1));
    case 'eol':
      return pos === text.length || (multiline && isLineTerminatorAt(text, pos));
    case 'word':
      return isWordAt(text, pos - 1, ignoreCase) !== isWordAt(text, pos, ignoreCase);
    case 'not_word':
      return isWordAt(text, pos - 1, ignoreCase) === isWordAt(text, pos, ignoreCase);
  }
}
