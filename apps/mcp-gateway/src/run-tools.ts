import { ArtifactPathParamSchema, CairnError, formatIssuePath, parseRunSpec, RunIdSchema, RunSpecSchema, StepIndexSchema } from '@cairn/contracts';
import { recordedBreaksOf, verifyChain } from '@cairn/evidence';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Bundle, CairnRuns } from './cairn-rest.client.js';
import { toolError, toolResult } from './tool-errors.js';

/*
 * The run tools: submit a RunSpec, read its state and receipts, and verify its chain offline.
 * Each is a thin edge over the REST gateway (with the caller's key) — the same policy, tenancy
 * and chain as every other client. Arguments are checked here first, so bad input is E_INPUT
 * naming the field and nothing is sent.
 */

/** As the REST gateway's `Idempotency-Key`: 1–200 printable ASCII characters. */
const IdempotencyKeySchema = z.string().min(1).max(200).regex(/^[\x20-\x7E]+$/, 'printable ASCII only');

const SubmitArgsSchema = z.strictObject({
  spec: z.unknown(),
  idempotencyKey: IdempotencyKeySchema.describe('Your key for this submission: the same key and spec give the same run (retry safely); a new key makes a new run.'),
});
const RunArgsSchema = z.strictObject({ runId: RunIdSchema.describe('The run id (run_…) that run_submit returned.') });
const RegradeArgsSchema = z.strictObject({
  runId: RunIdSchema.describe('The run id (run_…): a run whose grading failed (run_status: VERIFIED, not sealed).'),
  reason: z.string().min(1).max(1024).optional().describe('Why it is graded again (recorded on grade.requested).'),
});
const OutputsArgsSchema = z.strictObject({
  runId: RunIdSchema.describe('The run id (run_…).'),
  step: StepIndexSchema.optional().describe('Only this step (0, 1, …); absent: every completed step.'),
});
const ArtifactArgsSchema = z.strictObject({
  runId: RunIdSchema.describe('The run id (run_…).'),
  path: ArtifactPathParamSchema.describe('A collected file as run_outputs lists it (/out/report.json).'),
  encoding: z.enum(['utf8', 'base64']).default('utf8').describe('utf8 (default; base64 anyway when the bytes are not UTF-8) or base64.'),
});
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Bytes in a tool result: UTF-8 text when they are (and text was asked for), else base64. */
export function contentOf(bytes: Uint8Array, encoding: 'utf8' | 'base64' = 'utf8'): { encoding: 'utf8' | 'base64'; content: string } {
  if (encoding === 'utf8') {
    try {
      return { encoding: 'utf8', content: UTF8.decode(bytes) };
    } catch {
      // not UTF-8: base64 below
    }
  }
  return { encoding: 'base64', content: Buffer.from(bytes).toString('base64') };
}

const EventsArgsSchema = z.strictObject({
  runId: RunIdSchema.describe('The run id (run_…).'),
  after: z.number().int().min(0).max(2_147_483_647).default(0).describe('Return receipts with seq greater than this (0: from the start); pass the previous page’s nextAfter.'),
  limit: z.number().int().min(1).max(1000).default(100).describe('At most this many receipts (1–1000).'),
});

/** The advertised JSON Schema of a tool's arguments (MCP wants `type: object`). */
export function inputSchemaOf(schema: z.ZodType): Tool['inputSchema'] {
  const { $schema: _ignored, ...json } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' }) as Record<string, unknown>;
  return { ...json, type: 'object' };
}

/** Arguments checked against `schema`; E_INPUT naming the first fields that are wrong. */
export function parseArgs<S extends z.ZodType>(schema: S, args: unknown): z.infer<S> {
  const parsed = schema.safeParse(args ?? {});
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => ({ path: formatIssuePath(issue.path), message: issue.message }));
  throw new CairnError('E_INPUT', `invalid arguments: ${issues.map((i) => `${i.path === '' ? '(arguments)' : i.path}: ${i.message}`).join('; ')}`, { issues });
}

export interface RunTool {
  definition: Tool;
  call(runs: CairnRuns, args: unknown): Promise<Record<string, unknown>>;
}

/** Verifies a run's proof bundle locally: every hash from genesis, and the bundle's own claims. */
export async function verifyRun(runs: CairnRuns, runId: string): Promise<Record<string, unknown>> {
  return verifyBundle(await runs.bundle(runId), runId);
}

/**
 * Verifies a chain's proof bundle (a run's or a sandbox session's) here, not trusting the
 * server: every hash from genesis, the chain id, and the head the bundle names. A chain whose
 * receipts verify but which records that it was broken (a critical `alert.raised`
 * E_CHAIN_BROKEN: a message on it was no receipt, ADR 0033) is E_CHAIN_BROKEN `break_recorded`
 * at the alert's seq, as `cairn verify` answers it — never ok.
 */
export function verifyBundle(bundle: Bundle, runId: string): Record<string, unknown> {
  const result = verifyChain(bundle.receipts, { requireNonEmpty: true, chainId: runId });
  if (!result.ok) {
    throw new CairnError('E_CHAIN_BROKEN', `the chain of ${runId} is broken at seq ${result.firstBadSeq} (${result.reason}): ${result.message}`, {
      runId,
      firstBadSeq: result.firstBadSeq,
      reason: result.reason,
      verified: result.verified,
    });
  }
  const recorded = recordedBreaksOf(bundle.receipts)[0];
  if (recorded !== undefined) {
    throw new CairnError('E_CHAIN_BROKEN', `the receipts of ${runId} verify, but the chain records at seq ${recorded.seq} that it was broken: ${recorded.message}`, {
      runId,
      firstBadSeq: recorded.seq,
      reason: 'break_recorded',
      verified: result.count,
    });
  }
  if (bundle.runId !== runId) {
    throw new CairnError('E_CHAIN_BROKEN', `the bundle names chain ${bundle.runId}, not ${runId}`, { runId, reason: 'run_id_mismatch' });
  }
  if (bundle.headHash !== null && bundle.headHash !== result.headHash) {
    throw new CairnError('E_CHAIN_BROKEN', `the bundle names head ${bundle.headHash}, but its receipts recompute to ${result.headHash}`, {
      runId,
      reason: 'head_mismatch',
      firstBadSeq: result.headSeq,
    });
  }
  const last = bundle.receipts.at(-1) as { type?: unknown } | undefined;
  return {
    ok: true,
    runId,
    count: result.count,
    headSeq: result.headSeq,
    headHash: result.headHash,
    sealed: last?.type === 'run.sealed',
    verdict: bundle.verdict,
    grade: bundle.grade,
  };
}

export const RUN_TOOLS: readonly RunTool[] = [
  {
    definition: {
      name: 'run_submit',
      title: 'Submit a run',
      description:
        'Submit a RunSpec to Cairn: its steps (argv arrays, never shell strings) run in one hardened sandbox under policy, ' +
        'every step recorded on a hash-chained evidence log, then verified and graded. Returns the run id; follow it with ' +
        'run_status until sealed is true. Bad input is E_INPUT naming the field, and creates no run.',
      inputSchema: inputSchemaOf(z.strictObject({ spec: RunSpecSchema.describe('The RunSpec: name, image, steps, caps, …'), idempotencyKey: SubmitArgsSchema.shape.idempotencyKey })),
      annotations: { title: 'Submit a run', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async call(runs, args) {
      const { spec, idempotencyKey } = parseArgs(SubmitArgsSchema, args);
      parseRunSpec(spec);
      const submitted = await runs.submitRun(spec, idempotencyKey);
      return { runId: submitted.runId, state: submitted.state, duplicate: submitted.duplicate };
    },
  },
  {
    definition: {
      name: 'run_status',
      title: 'Run status',
      description:
        "A run's state (SUBMITTED … SEALED, or FAILED / ROLLBACK / REJECTED / CANCELLED with an errorCode), verdict, score, " +
        'event count and head hash, and traceId (the OpenTelemetry trace of the run, 32 hex) when it was submitted with tracing on. ' +
        '`sealed: true` means it is final.',
      inputSchema: inputSchemaOf(RunArgsSchema),
      annotations: { title: 'Run status', readOnlyHint: true, openWorldHint: false },
    },
    async call(runs, args) {
      const { runId } = parseArgs(RunArgsSchema, args);
      return { ...(await runs.getRun(runId)) };
    },
  },
  {
    definition: {
      name: 'run_events',
      title: 'Run receipts',
      description:
        "A page of a run's evidence receipts in chain order (seq from 1): each with its type, actor, time, and for steps the argv, " +
        'exit code and output hashes. Page with `after` = the previous nextAfter; nextAfter is null at the end for now.',
      inputSchema: inputSchemaOf(EventsArgsSchema),
      annotations: { title: 'Run receipts', readOnlyHint: true, openWorldHint: false },
    },
    async call(runs, args) {
      const { runId, after, limit } = parseArgs(EventsArgsSchema, args);
      const page = await runs.events(runId, after, limit);
      return { runId, items: page.items, nextAfter: page.nextAfter };
    },
  },
  {
    definition: {
      name: 'run_regrade',
      title: 'Grade a run again',
      description:
        'Grade again a verified run whose grading failed (a judge that timed out, failed or was not configured): the judges are ' +
        'asked anew, the steps are not run again, and the run is sealed. Follow it with run_status until sealed is true. ' +
        'A sealed run is the tool error E_SEALED; one graded, still grading or ended otherwise E_CONFLICT.',
      inputSchema: inputSchemaOf(RegradeArgsSchema),
      annotations: { title: 'Grade a run again', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async call(runs, args) {
      const { runId, reason } = parseArgs(RegradeArgsSchema, args);
      return { ...(await runs.regrade(runId, reason)) };
    },
  },
  {
    definition: {
      name: 'run_verify',
      title: 'Verify a run',
      description:
        "Fetch the run's proof bundle and verify it here, not trusting the server: recompute every receipt hash from genesis and " +
        'check the head. Returns ok with the count and head hash; a broken chain is the tool error E_CHAIN_BROKEN naming the first bad seq ' +
        '(reason break_recorded when the receipts verify but the chain records that it was broken, at the seq of that record).',
      inputSchema: inputSchemaOf(RunArgsSchema),
      annotations: { title: 'Verify a run', readOnlyHint: true, openWorldHint: false },
    },
    async call(runs, args) {
      const { runId } = parseArgs(RunArgsSchema, args);
      return verifyRun(runs, runId);
    },
  },
  {
    definition: {
      name: 'run_outputs',
      title: 'What a run printed and wrote',
      description:
        "Each completed step's stdout and stderr (redacted, bounded as the run's caps say; content as UTF-8 text, or base64 when not text: " +
        'encoding says which) with its sha256, and the list of collected files (path, sha256, bytes; read one with run_artifact). ' +
        'Every byte is checked against the sha256 the chain records before it is returned; bytes that do not match are E_INTERNAL, never returned.',
      inputSchema: inputSchemaOf(OutputsArgsSchema),
      annotations: { title: 'What a run printed and wrote', readOnlyHint: true, openWorldHint: false },
    },
    async call(runs, args) {
      const { runId, step } = parseArgs(OutputsArgsSchema, args);
      const listed = await runs.artifacts(runId);
      const chosen = listed.steps.filter((s) => step === undefined || s.index === step);
      if (step !== undefined && chosen.length === 0) throw new CairnError('E_NOT_FOUND', `run ${runId} has no completed step ${step}`, { runId, step });
      const steps = [];
      for (const s of chosen) {
        const streams: Record<string, unknown> = {};
        for (const stream of ['stdout', 'stderr'] as const) {
          const read = await runs.output(runId, s.index, stream, s[stream].sha256);
          streams[stream] = { sha256: read.sha256, bytes: read.bytes.byteLength, truncated: s[stream].truncated, ...contentOf(read.bytes) };
        }
        steps.push({ index: s.index, name: s.name, exitCode: s.exitCode, ...streams });
      }
      return { runId, steps, files: listed.items };
    },
  },
  {
    definition: {
      name: 'run_artifact',
      title: 'Read a file a run collected',
      description:
        'One file the run collected (/out/…, as run_outputs lists it), at most 16 MiB: content as UTF-8 text or base64 (encoding says which), ' +
        'bytes and sha256. Checked against the sha256 the chain records before it is returned (E_INTERNAL when they differ); an unknown path is E_NOT_FOUND.',
      inputSchema: inputSchemaOf(ArtifactArgsSchema),
      annotations: { title: 'Read a file a run collected', readOnlyHint: true, openWorldHint: false },
    },
    async call(runs, args) {
      const { runId, path, encoding } = parseArgs(ArtifactArgsSchema, args);
      const listed = await runs.artifacts(runId);
      const item = listed.items.find((i) => i.path === path);
      if (item === undefined) throw new CairnError('E_NOT_FOUND', `run ${runId} collected no file ${path}`, { runId, path });
      const read = await runs.artifact(runId, path, item.sha256);
      return { runId, path, sha256: read.sha256, bytes: read.bytes.byteLength, ...contentOf(read.bytes, encoding) };
    },
  },
];

const TOOLS_BY_NAME = new Map(RUN_TOOLS.map((tool) => [tool.definition.name, tool]));

export function findRunTool(name: string): RunTool | undefined {
  return TOOLS_BY_NAME.get(name);
}

/** One tool call: its result, or Cairn's error as an MCP tool error. */
export async function callRunTool(tool: RunTool, runs: CairnRuns, args: unknown): Promise<CallToolResult> {
  try {
    return toolResult(await tool.call(runs, args));
  } catch (error) {
    return toolError(error);
  }
}
