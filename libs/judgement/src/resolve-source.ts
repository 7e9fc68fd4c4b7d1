import type { PathSegment } from '@cairn/kernel';
import { junitSummary, KERNEL_LIMITS, parseJson, parsePathSegments, readQuoted, selectPath, tapSummary } from '@cairn/kernel';
import type { JudgementContext } from './judgement-context.js';

/**
 * Why a source gave no value:
 * - `invalid`: the source is not in the grammar (or names a field that does not exist);
 * - `absent`: well formed, but the run has no such value (a step that did not run, a file not
 *   collected, a key not in the JSON);
 * - `unreadable`: the thing exists but cannot be read as asked (not JSON, not a JUnit report).
 */
export type MissingKind = 'invalid' | 'absent' | 'unreadable';

export type SourceResolution = { found: true; value: unknown } | { found: false; kind: MissingKind; reason: string };

const STEP_INDEX = /^(0|[1-9][0-9]{0,8})\]\./;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Resolves a check's source against a run. The grammar (a superset of what the RunSpec schema
 * admits, which only allows `.name` segments):
 *
 * ```
 * source    := step | artifact | fact
 * step      := 'steps[' INDEX '].' NAME               stdout, stderr (the output), or a field of the
 *                                                     step's facts: exit_code, signal, stdout_sha256, …
 * artifact  := 'artifacts[' QUOTED ']' ( '' | '.sha256' | '.bytes'
 *              | '.json' SEGMENT* | '.junit' SEGMENT* | '.tap' SEGMENT* )
 *                                                     '' is the file's bytes; sha256/bytes come from the
 *                                                     facts; json/junit/tap read the file with the
 *                                                     kernel's registered operations
 * fact      := 'facts' SEGMENT+
 * SEGMENT   := '.' NAME | '[' INDEX ']' | '[' QUOTED ']'
 * ```
 * It never throws on any input; an unknown source is `{ found: false, kind: 'invalid' }`.
 */
export function resolveSource(ctx: JudgementContext, source: string): SourceResolution {
  if (typeof source !== 'string') return invalid('a source is a string');
  if (source.length > KERNEL_LIMITS.maxPathLength) return invalid(`a source is at most ${KERNEL_LIMITS.maxPathLength} characters`);
  if (source.startsWith('steps[')) return resolveStep(ctx, source);
  if (source.startsWith('artifacts[')) return resolveArtifact(ctx, source);
  if (source.startsWith('facts.') || source.startsWith('facts[')) return resolveFact(ctx, source);
  return invalid(`${JSON.stringify(source)} is not steps[i].…, artifacts["…"] or facts.…`);
}

function invalid(reason: string): SourceResolution {
  return { found: false, kind: 'invalid', reason };
}

function resolveStep(ctx: JudgementContext, source: string): SourceResolution {
  const rest = source.slice('steps['.length);
  const index = STEP_INDEX.exec(rest);
  if (index === null) return invalid(`${source}: expected steps[<index>].<field>`);
  const field = rest.slice(index[0].length);
  if (!NAME.test(field)) return invalid(`${source}: expected a field name after steps[${index[1]}].`);
  const at = Number(index[1]);

  if (field === 'stdout' || field === 'stderr') {
    const step = ctx.steps.find((s) => s.index === at);
    if (step === undefined) return { found: false, kind: 'absent', reason: `step ${at} has no recorded output` };
    return { found: true, value: step[field] };
  }
  const steps = ownValue(ctx.facts, 'steps');
  if (!Array.isArray(steps)) return { found: false, kind: 'absent', reason: 'the facts list no steps' };
  const facts: unknown = steps.find((s: unknown) => isRecord(s) && s.index === at);
  if (!isRecord(facts)) return { found: false, kind: 'absent', reason: `step ${at} did not run` };
  if (!Object.hasOwn(facts, field)) return invalid(`${source}: a step has no field ${field}`);
  return { found: true, value: facts[field] };
}

function resolveArtifact(ctx: JudgementContext, source: string): SourceResolution {
  const open = 'artifacts['.length;
  if (source[open] !== '"' && source[open] !== "'") return invalid(`${source}: expected artifacts["<path>"]`);
  const quoted = readQuoted(source, open);
  if (!quoted.ok || source[quoted.end] !== ']') return invalid(`${source}: expected artifacts["<path>"]`);
  const path = quoted.value;
  const rest = source.slice(quoted.end + 1);
  const content = ctx.artifacts.get(path);
  const missing: SourceResolution = { found: false, kind: 'absent', reason: `${path} was not collected` };

  if (rest === '') return content === undefined ? missing : { found: true, value: content };
  if (rest === '.sha256' || rest === '.bytes') {
    const artifacts = ownValue(ctx.facts, 'artifacts');
    const entry = isRecord(artifacts) ? ownValue(artifacts, path) : undefined;
    if (!isRecord(entry)) return { found: false, kind: 'absent', reason: `the facts list no artifact ${path}` };
    const field = rest.slice(1);
    return Object.hasOwn(entry, field) ? { found: true, value: entry[field] } : { found: false, kind: 'absent', reason: `no ${field} for ${path}` };
  }

  const reader = /^\.(json|junit|tap)(?![A-Za-z0-9_])/.exec(rest);
  if (reader === null) return invalid(`${source}: after artifacts["…"] comes nothing, .sha256, .bytes, .json, .junit or .tap`);
  const segments = parsePathSegments(rest, reader[0].length);
  if (!segments.ok) return invalid(`${source}: ${segments.reason}`);
  if (segments.end !== rest.length) return invalid(`${source}: unexpected '${rest[segments.end]}'`);
  if (content === undefined) return missing;

  let document: unknown;
  switch (reader[1]) {
    case 'json': {
      const parsed = parseJson(content);
      if (!parsed.ok) return { found: false, kind: 'unreadable', reason: `${path}: ${parsed.reason}` };
      document = parsed.value;
      break;
    }
    case 'junit': {
      const parsed = junitSummary(content);
      if (!parsed.ok) return { found: false, kind: 'unreadable', reason: `${path}: ${parsed.reason}` };
      document = parsed.summary;
      break;
    }
    default: {
      const parsed = tapSummary(content);
      if (!parsed.ok) return { found: false, kind: 'unreadable', reason: `${path}: ${parsed.reason}` };
      document = parsed.summary;
    }
  }
  return select(document, segments.segments, `artifacts[${JSON.stringify(path)}]${reader[0]}`);
}

function resolveFact(ctx: JudgementContext, source: string): SourceResolution {
  const segments = parsePathSegments(source, 'facts'.length);
  if (!segments.ok) return invalid(`${source}: ${segments.reason}`);
  if (segments.end !== source.length) return invalid(`${source}: unexpected '${source[segments.end]}'`);
  return select(ctx.facts, segments.segments, 'facts');
}

function select(document: unknown, segments: readonly PathSegment[], describe: string): SourceResolution {
  const selected = selectPath(document, segments, describe);
  return selected.found ? selected : { found: false, kind: 'absent', reason: selected.reason };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An own property only: a source can never reach a prototype. */
function ownValue(record: object, key: string): unknown {
  return Object.hasOwn(record, key) ? (record as Record<string, unknown>)[key] : undefined;
}
