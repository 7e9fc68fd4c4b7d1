import { createHash } from 'node:crypto';
import { ArgvSchema, CairnError, EnvSchema, formatIssuePath, MAX_EXEC_STDIN_BYTES, parseSandboxSpec, SandboxFilePathSchema, SandboxIdSchema, WorkdirSchema } from '@cairn/contracts';
import type { ExecRequest, SandboxSpec } from '@cairn/contracts';
import { z } from 'zod';
import { usageError } from './exit-codes.js';

/*
 * The CLI's checks of what a `cairn sandbox` command line asks, before anything is sent: a bad id,
 * path, argv or spec is E_INPUT (exit 2) saying what is wrong, and no request is made. The
 * requests themselves go through @cairn/sdk.
 */

const ExecRequestSchema = z.strictObject({
  argv: ArgvSchema,
  env: EnvSchema.optional(),
  workdir: WorkdirSchema.optional(),
  stdin: z.string().max(MAX_EXEC_STDIN_BYTES).optional(),
  timeoutSeconds: z.number().int().positive().max(86_400).optional(),
});

function firstIssues(error: z.ZodError): string {
  return error.issues.map((issue) => `${formatIssuePath(issue.path) || '(request)'}: ${issue.message}`).join('; ');
}

export function parseSandboxId(value: string): string {
  const parsed = SandboxIdSchema.safeParse(value);
  if (!parsed.success) throw usageError(`invalid sandbox id ${JSON.stringify(value)}: a sandbox id is sbx_… in [a-z0-9_-]`, { sandboxId: value });
  return parsed.data;
}

export function parseSandboxFilePath(value: string): string {
  const parsed = SandboxFilePathSchema.safeParse(value);
  if (!parsed.success) throw usageError(`invalid sandbox path ${JSON.stringify(value)}: ${parsed.error.issues[0]?.message ?? 'not a path'}`, { path: value });
  return parsed.data;
}

/** An exec request checked against the contract's rules (argv, env names, workdir, timeout). */
export function parseExecRequest(request: ExecRequest): ExecRequest {
  const parsed = ExecRequestSchema.safeParse(request);
  if (!parsed.success) throw usageError(`invalid exec: ${firstIssues(parsed.error)}`, { issues: parsed.error.issues.map((i) => ({ path: formatIssuePath(i.path), message: i.message })) });
  return parsed.data;
}

/** A SandboxSpec checked against the contracts; E_INPUT names the field. */
export function checkSandboxSpec(spec: unknown): SandboxSpec {
  try {
    return parseSandboxSpec(spec);
  } catch (error) {
    if (error instanceof CairnError) throw usageError(error.message, error.details);
    throw error;
  }
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}
