import type { Finding, OutputScanner } from './output-scanner.js';

/*
 * Every string a workload could have chosen, wherever it ends up — a file name as a key of
 * `artifact_hashes`, a host in `egress.denied`, a test name in `kernel.facts`, an error message, a
 * log field — is scanned before it is appended, stored, logged or returned (issue 13). Pure: a JSON
 * value in, the same value with every finding replaced by its marker out, and where it was found.
 */

/** One finding, and the top-level field of the value it was found under. */
export interface FieldFinding extends Finding {
  /** The top-level key it was found under (`artifact_hashes`, `host`, `message`); `''` for a bare string. */
  readonly field: string;
  /** Whether it was found in an object key (a file name as a key) rather than in a value. */
  readonly inKey: boolean;
}

export interface RedactedJson<T> {
  /** The value itself when nothing was found; otherwise a copy with every finding replaced. */
  readonly value: T;
  readonly findings: readonly FieldFinding[];
}

/**
 * Scans every string of `value` (object keys too) and replaces what the scanner finds. Two keys
 * that redact to the same text keep apart (`… (2)`), so no entry is lost. Values that are not
 * strings, arrays or plain objects are kept as they are.
 */
export function redactJson<T>(scanner: OutputScanner, value: T): RedactedJson<T> {
  const findings: FieldFinding[] = [];
  const walk = (node: unknown, field: string, depth: number): unknown => {
    if (typeof node === 'string') {
      const scanned = scanner.scanText(node);
      for (const finding of scanned.findings) findings.push({ ...finding, field, inKey: false });
      return scanned.text;
    }
    if (depth > 64 || node === null || typeof node !== 'object') return node;
    if (Array.isArray(node)) {
      let changed = false;
      const out = node.map((item: unknown) => {
        const next = walk(item, field, depth + 1);
        changed ||= next !== item;
        return next;
      });
      return changed ? out : node;
    }
    if (Object.getPrototypeOf(node) !== Object.prototype && Object.getPrototypeOf(node) !== null) return node;
    let changed = false;
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(node)) {
      const childField = depth === 0 ? key : field;
      const scannedKey = scanner.scanText(key);
      let outKey = scannedKey.text;
      if (scannedKey.findings.length > 0) {
        changed = true;
        for (const finding of scannedKey.findings) findings.push({ ...finding, field: childField, inKey: true });
        for (let n = 2; Object.hasOwn(out, outKey); n++) outKey = `${scannedKey.text} (${n})`;
      }
      const next = walk(item, childField, depth + 1);
      changed ||= next !== item;
      out[outKey] = next;
    }
    return changed ? out : node;
  };
  const redacted = walk(value, '', 0) as T;
  return { value: redacted, findings };
}
