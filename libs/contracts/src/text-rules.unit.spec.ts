import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isCairnError } from './error-codes.js';
import { formatIssuePath, parseRunSpec } from './run-spec.schema.js';
import type { InputIssue } from './run-spec.schema.js';
import { parseSandboxSpec } from './sandbox-spec.schema.js';
import { stringPositions, withChangedText } from './testing/string-positions.js';
import type { StringPosition } from './testing/string-positions.js';
import { storableText, unstorableText, utf8ByteLength } from './text-rules.js';

/* The one rule for text a receipt or a projection stores: no NUL (PostgreSQL cannot hold it), no lone surrogate. */

/** A RunSpec using every field that holds text, valid as it is. */
const EVERY_FIELD = {
  name: 'every field',
  image: 'cairn/sandbox-python:1',
  job: 'nightly-42',
  steps: [
    { name: 'test-before', argv: ['sh', '/work/test.sh'], workdir: '/work', env: { MODE: 'before' }, timeoutSeconds: 60 },
    { name: 'patch', argv: ['sh', '-c', 'cp /work/fix.diff /out/fix.diff'], apply: true },
    { name: 'test-after', argv: ['sh', '/work/test.sh'], workdir: '/work', env: { MODE: 'after' } },
  ],
  files: [
    { path: '/work/test.sh', content: 'echo ok\n', encoding: 'utf8' },
    { path: '/work/fix.diff', content: 'LS0tIGEK', encoding: 'base64', mode: 0o644 },
  ],
  outputs: ['/out'],
  caps: { wallSeconds: 300, memoryMiB: 512 },
  network: { egress: ['pypi.org:443'] },
  secrets: ['PYPI_TOKEN'],
  checks: [
    { id: 'says-ok', source: 'steps[2].stdout', op: 'contains', value: 'ok', weight: 1 },
    { id: 'diff', source: 'artifacts["/out/fix.diff"].sha256', op: 'exists', weight: 1 },
  ],
  claim: { statement: 'the patch keeps the test green', checks: [{ id: 'after', source: 'steps[2].stdout', op: 'matches', value: '^ok$' }] },
  gate: { patchStep: 'patch', patch: '/out/fix.diff', checks: [{ id: 'same', before: 'steps[0].stdout', after: 'steps[2].stdout', op: 'eq', value: 'ok\n' }] },
};

const EVERY_SANDBOX_FIELD = {
  image: 'cairn/sandbox:1',
  caps: { memoryMiB: 256 },
  network: { egress: ['pypi.org:443'] },
  secrets: ['API_TOKEN'],
  env: { MODE: 'dev' },
  files: [{ path: '/work/main.py', content: 'print(1)\n' }],
  ttlSeconds: 600,
  idleSeconds: 60,
};

function issuesOf(parse: () => unknown): InputIssue[] {
  try {
    parse();
  } catch (error) {
    if (isCairnError(error) && error.code === 'E_INPUT') return (error.details as { issues: InputIssue[] }).issues;
    throw error;
  }
  throw new Error('expected E_INPUT, it was accepted');
}

const withNul = (text: string) => `${text.slice(0, 1)}\u0000${text.slice(1)}`;

/**
 * Whether an issue names the place: a value's own path (or inside it: a union reports the option
 * it tried); a member name as the renamed member (`unknown field`) or inside its record (a bad key).
 */
function namesPlace(issues: readonly InputIssue[], position: StringPosition): boolean {
  const within = (path: string) => issues.some((issue) => issue.path === path || issue.path.startsWith(`${path}.`) || issue.path.startsWith(`${path}[`));
  if (position.kind === 'value') return within(formatIssuePath(position.path));
  const parent = position.path.slice(0, -1);
  const renamed = formatIssuePath([...parent, withNul(position.text)]);
  return issues.some((issue) => issue.path === renamed) || (parent.length > 0 && within(formatIssuePath(parent)));
}

describe('unstorableText', () => {
  it.each([
    ['', null],
    ['plain', null],
    ['every other control character \u0001\u0007\t\n\r\u001b\u007f\u0085, U+2028 \u2028 and U+2029 \u2029', null],
    ['a pair 😀 and a BOM \uFEFF', null],
    ['a\u0000b', 'NUL (U+0000)'],
    ['\u0000', 'NUL (U+0000)'],
    ['a high half alone \uD83D', 'a lone surrogate'],
    ['\uDE00 a low half alone', 'a lone surrogate'],
    ['both, NUL first named \uD83D\u0000', 'NUL (U+0000)'],
  ])('%j → %s', (text, problem) => {
    expect(unstorableText(text)).toBe(problem);
  });
});

describe('storableText', () => {
  const schema = z.strictObject({ note: z.string().check(storableText('a note', '; say it another way')) });

  it('names what may not hold the character, then the hint, at the field', () => {
    const result = schema.safeParse({ note: 'a\u0000b' });
    expect(result.success).toBe(false);
    expect(result.error?.issues).toEqual([expect.objectContaining({ path: ['note'], message: 'a note may not contain NUL (U+0000); say it another way' })]);
    expect(schema.safeParse({ note: 'a\uD800' }).error?.issues[0]?.message).toBe('a note may not contain a lone surrogate; say it another way');
  });

  it('accepts every other text unchanged', () => {
    const note = 'tab\tnewline\nescape\u001b emoji 😀 separators \u2028\u2029';
    expect(schema.parse({ note })).toEqual({ note });
  });
});

describe('RunSpec and SandboxSpec: no string and no member name may hold NUL', () => {
  it('the specs used here are valid as they are', () => {
    expect(parseRunSpec(EVERY_FIELD)).toEqual(EVERY_FIELD);
    expect(parseSandboxSpec(EVERY_SANDBOX_FIELD)).toEqual(EVERY_SANDBOX_FIELD);
  });

  const runPositions = stringPositions(EVERY_FIELD);
  const sandboxPositions = stringPositions(EVERY_SANDBOX_FIELD);

  it('covers every free-text field of the RunSpec', () => {
    const paths = runPositions.filter((p) => p.kind === 'value').map((p) => formatIssuePath(p.path));
    for (const field of ['claim.statement', 'files[0].content', 'checks[0].value', 'claim.checks[0].value', 'gate.checks[0].value', 'steps[0].argv[1]', 'steps[0].env.MODE']) {
      expect(paths).toContain(field);
    }
  });

  it.each(runPositions.map((p) => [`${p.kind} ${formatIssuePath(p.path)}`, p] as const))('RunSpec %s: E_INPUT at that field', (_where, position) => {
    const issues = issuesOf(() => parseRunSpec(withChangedText(EVERY_FIELD, position, withNul)));
    expect(namesPlace(issues, position), JSON.stringify(issues)).toBe(true);
  });

  it.each(sandboxPositions.map((p) => [`${p.kind} ${formatIssuePath(p.path)}`, p] as const))('SandboxSpec %s: E_INPUT at that field', (_where, position) => {
    const issues = issuesOf(() => parseSandboxSpec(withChangedText(EVERY_SANDBOX_FIELD, position, withNul)));
    expect(namesPlace(issues, position), JSON.stringify(issues)).toBe(true);
  });

  it.each([
    ['claim.statement', { ...EVERY_FIELD, claim: { ...EVERY_FIELD.claim, statement: 'holds\u0000' } }, 'claim.statement: a statement may not contain NUL (U+0000)'],
    [
      'a utf8 file',
      { ...EVERY_FIELD, files: [{ path: '/work/a.bin', content: 'ELF\u0000\u0000' }] },
      'files[0].content: file content may not contain NUL (U+0000); send a binary file base64-encoded (encoding: base64)',
    ],
    ['a check value', { ...EVERY_FIELD, checks: [{ id: 'nul', source: 'steps[0].stdout', op: 'contains', value: 'a\u0000', weight: 1 }] }, 'checks[0].value: a check value may not contain NUL (U+0000); a matches pattern can name it as \\u0000'],
    ['an environment value', { ...EVERY_FIELD, steps: [{ argv: ['id'], env: { A: 'x\u0000y' } }], gate: undefined }, 'steps[0].env.A: an environment value may not contain NUL (U+0000)'],
  ])('says what to do instead: %s', (_what, spec, message) => {
    const issues = issuesOf(() => parseRunSpec(spec));
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toContain(message);
  });

  it('accepts a binary file base64-encoded: the NUL bytes are in what it decodes to, not in the JSON', () => {
    const content = Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x00, 0x00, 0x01]).toString('base64');
    const spec = { name: 'binary', steps: [{ argv: ['true'] }], files: [{ path: '/work/a.bin', content, encoding: 'base64' }] };
    expect(parseRunSpec(spec)).toEqual(spec);
    expect(Buffer.from(content, 'base64').includes(0)).toBe(true);
  });

  it.each([
    ['claim.statement', { name: 'x', steps: [{ argv: ['true'] }], claim: { statement: 'half \uD83D', checks: [{ id: 'c', source: 'steps[0].exit_code', op: 'eq', value: 0 }] } }],
    ['files[0].content', { name: 'x', steps: [{ argv: ['true'] }], files: [{ path: '/work/a', content: '\uDE00' }] }],
    ['steps[0].argv[1]', { name: 'x', steps: [{ argv: ['echo', '\uD800'] }] }],
  ])('refuses a lone surrogate in free text at the edge too (%s): canonical JSON could not hash it', (path, spec) => {
    const issues = issuesOf(() => parseRunSpec(spec));
    expect(issues).toContainEqual({ path, message: expect.stringContaining('may not contain a lone surrogate') as string });
  });
});

describe('utf8ByteLength', () => {
  it.each(['', 'ascii', 'héllo', '€', '😀 and 𝄞', 'a\u0000b', 'lone \uD800 high', 'lone \uDC00 low', '\uDBFF\uDFFF', 'x'.repeat(70_000)])(
    'counts what Node encodes: %j',
    (text) => {
      expect(utf8ByteLength(text)).toBe(Buffer.byteLength(text, 'utf8'));
    },
  );
});
