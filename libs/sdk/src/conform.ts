import { CairnError, ChainIdSchema, formatIssuePath, parseEvidenceReceipt, Sha256HexSchema } from '@cairn/contracts';
import type { Receipt } from '@cairn/contracts';
import { z } from 'zod';

/*
 * How an answer is held to the contracts. The REST shapes are strict objects: `strict` checks an
 * answer exactly so (a test that client and gateway agree); `tolerant` first drops the fields the
 * contracts do not know — what a newer gateway may add — and holds the rest exactly as strictly.
 * Receipts are never re-built by a parser: their envelope is checked and the stored object is
 * passed on as it came, so its hash still verifies.
 */

export type Validation = 'tolerant' | 'strict';

type Issue = z.core.$ZodIssue;

function withoutKeys(value: unknown, issues: readonly Issue[]): unknown {
  const copy: unknown = structuredClone(value);
  for (const issue of issues) {
    if (issue.code !== 'unrecognized_keys') continue;
    let target: unknown = copy;
    for (const key of issue.path) target = typeof target === 'object' && target !== null ? (target as Record<PropertyKey, unknown>)[key] : undefined;
    if (typeof target !== 'object' || target === null) continue;
    for (const key of issue.keys) Reflect.deleteProperty(target, key);
  }
  return copy;
}

function describeIssues(issues: readonly Issue[]): string {
  return issues
    .slice(0, 3)
    .map((issue) => `${formatIssuePath(issue.path)}: ${issue.code === 'unrecognized_keys' ? `unknown field ${issue.keys.join(', ')}` : issue.message}`)
    .join('; ');
}

/** The answer as the contract's type, or E_INTERNAL saying where it does not match. */
export function conform<S extends z.ZodType>(schema: S, value: unknown, validation: Validation, what: string): z.infer<S> {
  let result = schema.safeParse(value);
  // A few rounds: dropping an unknown field can only reveal issues below it.
  for (let round = 0; !result.success && validation === 'tolerant' && round < 4; round += 1) {
    const issues = result.error.issues;
    if (!issues.every((issue) => issue.code === 'unrecognized_keys')) break;
    value = withoutKeys(value, issues);
    result = schema.safeParse(value);
  }
  if (result.success) return result.data;
  throw new CairnError('E_INTERNAL', `${what}: the gateway's answer does not match the REST contract: ${describeIssues(result.error.issues)}`, {
    issues: result.error.issues.slice(0, 10).map((issue) => ({ path: formatIssuePath(issue.path), message: issue.message })),
  });
}

/** What every stored receipt has; the rest is its type's, carried through untouched. */
export const WireReceiptSchema = z.looseObject({
  seq: z.number().int().min(1),
  run_id: ChainIdSchema,
  tenant: z.string(),
  type: z.string().min(1),
  actor: z.string(),
  ts: z.string(),
  prev_hash: Sha256HexSchema,
  hash: Sha256HexSchema,
});

/**
 * A receipt checked by its envelope — and, `strict`, by its type's own contract — and returned as
 * the very object that came (a tolerant reader takes a receipt type it does not know yet).
 */
export function wireReceipt(value: unknown, what: string, validation: Validation): Receipt {
  const result = WireReceiptSchema.safeParse(value);
  if (!result.success) throw new CairnError('E_INTERNAL', `${what}: a receipt without its envelope: ${describeIssues(result.error.issues)}`);
  if (validation === 'strict') {
    const typed = parseEvidenceReceipt(value);
    if (!typed.ok) throw new CairnError('E_INTERNAL', `${what}: receipt ${result.data.seq} does not match the contract of ${result.data.type}: ${typed.message}`);
  }
  return value as Receipt;
}
