import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { z } from 'zod';
import { ErrorBodySchema } from '../error-codes.js';
import { EvidenceEventSchema, EvidenceReceiptSchema } from '../evidence-event.schema.js';
import { RunSpecSchema } from '../run-spec.schema.js';
import { SandboxSpecSchema } from '../sandbox-spec.schema.js';

/*
 * The JSON Schemas generated from the contracts, committed under libs/contracts/schema/ so a
 * contract change shows up as a reviewable diff (schemas-fresh.unit.spec.ts fails when they are stale).
 */

const SCHEMAS: readonly { file: string; title: string; description: string; schema: z.ZodType }[] = [
  { file: 'run-spec.schema.json', title: 'Cairn RunSpec', description: 'What a client asks Cairn to run (REST and CLI input).', schema: RunSpecSchema },
  { file: 'sandbox-spec.schema.json', title: 'Cairn SandboxSpec', description: 'An interactive sandbox session request.', schema: SandboxSpecSchema },
  { file: 'evidence-event.schema.json', title: 'Cairn receipt body', description: 'A receipt body: the hashed part of an evidence receipt.', schema: EvidenceEventSchema },
  { file: 'evidence-receipt.schema.json', title: 'Cairn evidence receipt', description: 'A stored receipt: body plus prev_hash and hash; one line of a chain file.', schema: EvidenceReceiptSchema },
  { file: 'error-body.schema.json', title: 'Cairn error', description: 'How errors cross every wire.', schema: ErrorBodySchema },
];

const CROSS_FIELD_NOTE = 'Generated from @cairn/contracts; cross-field rules (refinements) are enforced there and not expressed here.';

/** Recursively sorts object keys, so the files do not depend on declaration order. */
function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (typeof value !== 'object' || value === null) return value;
  const sorted: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) sorted[key] = sortKeys((value as Record<string, unknown>)[key]);
  return sorted;
}

/** File name → JSON Schema, generated in memory. Pure. */
export function generateSchemas(): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { file, title, description, schema } of SCHEMAS) {
    out[file] = sortKeys({ ...z.toJSONSchema(schema, { target: 'draft-2020-12' }), title, description: `${description} ${CROSS_FIELD_NOTE}` });
  }
  return out;
}

/** File name → exact file text: pretty, stable key order, trailing newline. */
export function renderSchemaFiles(): Record<string, string> {
  return Object.fromEntries(Object.entries(generateSchemas()).map(([file, schema]) => [file, `${JSON.stringify(schema, null, 2)}\n`]));
}

/** Writes every schema file and removes generated files that no longer exist. */
function writeSchemaFiles(dir: URL): string[] {
  const files = renderSchemaFiles();
  mkdirSync(dir, { recursive: true });
  for (const name of readdirSync(dir)) {
    if (name.endsWith('.json') && !(name in files)) rmSync(new URL(name, dir));
  }
  for (const [name, text] of Object.entries(files)) writeFileSync(new URL(name, dir), text);
  return Object.keys(files);
}

// `npm run schemas` runs dist/tools/generate-schemas.js; ../../schema/ is libs/contracts/schema/.
if (import.meta.main) {
  const written = writeSchemaFiles(new URL('../../schema/', import.meta.url));
  process.stdout.write(`wrote ${written.length} schemas to libs/contracts/schema/: ${written.join(', ')}\n`);
}
