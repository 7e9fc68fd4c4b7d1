import { KERNEL_LIMITS } from './kernel-limits.constants.js';
import { decodeUtf8 } from './text.operation.js';

/*
 * A safe subset of JSONPath: `$` followed by segments `.name`, `[0]`, `["key"]` or `['key']`. No
 * wildcards, filters, slices, recursion or script, so selecting is a walk of at most one value per
 * segment. Only own properties are followed: `$.constructor` and `$.__proto__` find nothing.
 */

export type PathSegment = { kind: 'key'; key: string } | { kind: 'index'; index: number };

export type PathParse = { ok: true; segments: PathSegment[]; end: number } | { ok: false; reason: string };

export type JsonSelection = { found: true; value: unknown } | { found: false; reason: string };

const NAME = /^[A-Za-z_][A-Za-z0-9_]*/;
const WHOLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const INDEX = /^(0|[1-9][0-9]{0,8})\]/;

/**
 * Reads segments from `text` starting at `start` until the end of text or a character that cannot
 * begin a segment; `end` is where it stopped. Callers that require the whole text check `end`.
 */
export function parsePathSegments(text: string, start: number): PathParse {
  const segments: PathSegment[] = [];
  let pos = start;
  while (pos < text.length) {
    const c = text[pos];
    if (c === '.') {
      const name = NAME.exec(text.slice(pos + 1, pos + 1 + KERNEL_LIMITS.maxPathLength));
      if (name === null) return { ok: false, reason: `a name must follow '.' at position ${pos}` };
      segments.push({ kind: 'key', key: name[0] });
      pos += 1 + name[0].length;
    } else if (c === '[') {
      const quote = text[pos + 1];
      if (quote === '"' || quote === "'") {
        const literal = readQuoted(text, pos + 1);
        if (!literal.ok || text[literal.end] !== ']') return { ok: false, reason: `an unterminated ["key"] at position ${pos}` };
        segments.push({ kind: 'key', key: literal.value });
        pos = literal.end + 1;
      } else {
        const index = INDEX.exec(text.slice(pos + 1, pos + 12));
        if (index === null) return { ok: false, reason: `an index must be a non-negative integer at position ${pos}` };
        segments.push({ kind: 'index', index: Number(index[1]) });
        pos += 1 + index[0].length;
      }
    } else {
      break;
    }
  }
  return { ok: true, segments, end: pos };
}

/** A quoted key: `"…"` with JSON escapes, or `'…'` where only `\'` and `\\` are escapes. */
export function readQuoted(text: string, start: number): { ok: true; value: string; end: number } | { ok: false } {
  const quote = text[start];
  let single = '';
  for (let pos = start + 1; pos < text.length; pos++) {
    const c = text[pos]!;
    if (c === quote) {
      if (quote === "'") return { ok: true, value: single, end: pos + 1 };
      try {
        return { ok: true, value: JSON.parse(text.slice(start, pos + 1)) as string, end: pos + 1 };
      } catch {
        return { ok: false };
      }
    }
    if (c === '\\') {
      const escaped = text[++pos];
      if (escaped === undefined) return { ok: false };
      single += escaped === "'" || escaped === '\\' ? escaped : `\\${escaped}`;
    } else {
      single += c;
    }
  }
  return { ok: false };
}

export function parseJsonPath(path: string): PathParse {
  if (path.length > KERNEL_LIMITS.maxPathLength) return { ok: false, reason: `the path is longer than ${KERNEL_LIMITS.maxPathLength} characters` };
  if (!path.startsWith('$')) return { ok: false, reason: `a JSON path starts with '$'` };
  const parsed = parsePathSegments(path, 1);
  if (parsed.ok && parsed.end !== path.length) return { ok: false, reason: `unexpected '${path[parsed.end]}' at position ${parsed.end}` };
  return parsed;
}

/** Walks `segments` from `value`; a missing key, an index past the end or a wrong type is not found. */
export function selectPath(value: unknown, segments: readonly PathSegment[], describe = '$'): JsonSelection {
  let current = value;
  let where = describe;
  for (const segment of segments) {
    if (segment.kind === 'index') {
      if (!Array.isArray(current)) return { found: false, reason: `${where} is not an array` };
      if (segment.index >= current.length) return { found: false, reason: `${where} has no element ${segment.index}` };
      current = current[segment.index] as unknown;
      where += `[${segment.index}]`;
    } else {
      if (typeof current !== 'object' || current === null || Array.isArray(current)) {
        return { found: false, reason: `${where} is not an object` };
      }
      if (!Object.hasOwn(current, segment.key)) return { found: false, reason: `${where} has no key ${JSON.stringify(segment.key)}` };
      current = (current as Record<string, unknown>)[segment.key];
      where += WHOLE_NAME.test(segment.key) ? `.${segment.key}` : `[${JSON.stringify(segment.key)}]`;
    }
  }
  return { found: true, value: current };
}

export type JsonParse = { ok: true; value: unknown } | { ok: false; reason: string };

/** Parses a JSON document from bytes (UTF-8) or text, within the size limit. */
export function parseJson(content: Uint8Array | string): JsonParse {
  let text: string;
  if (typeof content === 'string') {
    if (content.length > KERNEL_LIMITS.maxJsonBytes) return { ok: false, reason: `the document is larger than ${KERNEL_LIMITS.maxJsonBytes} bytes` };
    text = content;
  } else {
    const decoded = decodeUtf8(content, KERNEL_LIMITS.maxJsonBytes);
    if (!decoded.ok) return decoded;
    text = decoded.text.startsWith('\ufeff') ? decoded.text.slice(1) : decoded.text;
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (error) {
    return { ok: false, reason: `not JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** The `json_path` operation: select `path` in the JSON `document`. */
export function jsonPath(document: Uint8Array | string, path: string): JsonSelection {
  const parsed = parseJsonPath(path);
  if (!parsed.ok) return { found: false, reason: parsed.reason };
  const json = parseJson(document);
  if (!json.ok) return { found: false, reason: json.reason };
  return selectPath(json.value, parsed.segments);
}
