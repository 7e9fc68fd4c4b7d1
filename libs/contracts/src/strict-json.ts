import { CairnError } from './error-codes.js';
import { formatIssuePath } from './run-spec.schema.js';

/*
 * JSON text as Cairn accepts it from outside (request bodies, spec files): RFC 8259 JSON whose
 * objects have unique member names and which nests no deeper than a RunSpec ever needs.
 * `JSON.parse` keeps the last of two equal names, so `{"argv":["true"],"argv":["rm","-rf","/"]}`
 * means one thing to one reader and another to the next: ambiguous input is refused, not guessed.
 */

/** Deeper than any RunSpec (its deepest value is ~5 levels down); deeper is a mistake or an attack. */
export const MAX_JSON_DEPTH = 64;

export interface StrictJsonOptions {
  maxDepth?: number;
}

interface Frame {
  kind: 'object' | 'array';
  /** Object: the names seen so far. */
  names: Set<string>;
  /** Object: the next string is a member name. */
  expectName: boolean;
  /** Where this container sits: the member name or index that holds it. */
  key: string | number | null;
  /** Object: the member being read; array: the index being read. */
  current: string | number | null;
}

function pathOf(stack: readonly Frame[], last: string | number): string {
  const path: (string | number)[] = [];
  for (const frame of stack.slice(1)) if (frame.key !== null) path.push(frame.key);
  path.push(last);
  return formatIssuePath(path);
}

/**
 * Checks JSON text that `JSON.parse` accepted: throws `E_INPUT` naming the place of the first
 * duplicate member name (compared after unescaping, so `"n\u0061me"` is `"name"`) or of the
 * first container nested deeper than `maxDepth`. Linear in the text, no recursion.
 */
export function checkJsonText(text: string, options: StrictJsonOptions = {}): void {
  const maxDepth = options.maxDepth ?? MAX_JSON_DEPTH;
  const stack: Frame[] = [];
  const top = (): Frame | undefined => stack[stack.length - 1];
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let j = i + 1;
      let escaped = false;
      while (j < text.length && text.charCodeAt(j) !== 0x22) {
        if (text.charCodeAt(j) === 0x5c /* \ */) {
          escaped = true;
          j += 2;
        } else j += 1;
      }
      const frame = top();
      if (frame?.kind === 'object' && frame.expectName) {
        const name = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : text.slice(i + 1, j);
        if (frame.names.has(name)) {
          const where = pathOf(stack, name);
          throw new CairnError('E_INPUT', `${where}: duplicate key (ambiguous JSON is refused)`, { issues: [{ path: where, message: 'duplicate key' }] });
        }
        frame.names.add(name);
        frame.current = name;
        frame.expectName = false;
      }
      i = j + 1;
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const parent = top();
      const key = parent === undefined ? null : parent.current;
      stack.push({ kind: c === 0x7b ? 'object' : 'array', names: new Set(), expectName: c === 0x7b, key, current: c === 0x7b ? null : 0 });
      if (stack.length > maxDepth) {
        const where = pathOf(stack.slice(0, -1), key ?? '(root)');
        throw new CairnError('E_INPUT', `${where}: JSON nested deeper than ${maxDepth} levels`, { issues: [{ path: where, message: `nested deeper than ${maxDepth} levels` }] });
      }
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
    } else if (c === 0x2c /* , */) {
      const frame = top();
      if (frame?.kind === 'object') frame.expectName = true;
      else if (frame !== undefined && typeof frame.current === 'number') frame.current += 1;
    }
    i += 1;
  }
}

/** `JSON.parse`, then `checkJsonText`: malformed, ambiguous or too deep text is `E_INPUT`. */
export function parseStrictJson(text: string, options: StrictJsonOptions = {}): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new CairnError('E_INPUT', `not valid JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  checkJsonText(text, options);
  return value;
}
