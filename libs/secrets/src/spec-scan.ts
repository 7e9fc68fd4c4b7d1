import { CairnError, formatIssuePath } from '@cairn/contracts';
import { KEY_PATTERNS, keyPatternDescription } from './key-patterns.js';
import type { KeyPattern } from './key-patterns.js';

/** A literal credential in a RunSpec: where, and which pattern (never the text). */
export interface LiteralKey {
  /** `steps[0].env.TOKEN`, `files[1].content`. */
  readonly path: string;
  readonly pattern: string;
}

function patternsIn(text: string, patterns: readonly KeyPattern[]): string[] {
  const ids: string[] = [];
  for (const pattern of patterns) {
    pattern.regex.lastIndex = 0;
    if (pattern.regex.test(text)) ids.push(pattern.id);
    pattern.regex.lastIndex = 0;
  }
  return ids;
}

/** A base64 file's bytes as latin1, one character per byte, so binary content is scanned too. */
function decodedFileContent(file: unknown): string | null {
  if (typeof file !== 'object' || file === null) return null;
  const { content, encoding } = file as { content?: unknown; encoding?: unknown };
  return encoding === 'base64' && typeof content === 'string' ? Buffer.from(content, 'base64').toString('latin1') : null;
}

/**
 * Every string in a RunSpec (argv, env values, file contents — base64 ones decoded — names, check
 * values, …) checked for the key patterns. The spec is plain JSON data here (already parsed).
 */
export function findLiteralKeys(spec: unknown, patterns: readonly KeyPattern[] = KEY_PATTERNS): LiteralKey[] {
  const found: LiteralKey[] = [];
  const visit = (value: unknown, path: (string | number)[]) => {
    if (typeof value === 'string') {
      for (const pattern of patternsIn(value, patterns)) found.push({ path: formatIssuePath(path), pattern });
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => visit(item, [...path, i]));
    } else if (typeof value === 'object' && value !== null) {
      for (const [key, inner] of Object.entries(value)) visit(inner, [...path, key]);
    }
  };
  visit(spec, []);
  const files = typeof spec === 'object' && spec !== null ? (spec as { files?: unknown }).files : undefined;
  if (Array.isArray(files)) {
    files.forEach((file, i) => {
      const decoded = decodedFileContent(file);
      if (decoded === null) return;
      for (const pattern of patternsIn(decoded, patterns)) found.push({ path: formatIssuePath(['files', i, 'content']), pattern });
    });
  }
  return found;
}

/**
 * Intake's check (PRODUCT.md "Redaction comes before hashing"): a RunSpec that holds a literal
 * credential is refused with E_INPUT naming each field and what it looks like — never the value —
 * and saying where a secret belongs instead.
 */
export function assertNoLiteralKeys(spec: unknown): void {
  const found = findLiteralKeys(spec);
  if (found.length === 0) return;
  const where = found.map((f) => `${f.path} holds what looks like ${keyPatternDescription(f.pattern)}`).join('; ');
  throw new CairnError(
    'E_INPUT',
    `invalid RunSpec: ${where}. A secret belongs in the secret store (\`cairn secrets set NAME\`), referenced by name under secrets: [NAME] and read from /run/secrets/NAME`,
    { issues: found.map((f) => ({ path: f.path, message: `looks like ${keyPatternDescription(f.pattern)}`, pattern: f.pattern })) },
  );
}
