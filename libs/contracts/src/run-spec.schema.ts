import { z } from 'zod';
import { CairnError } from './error-codes.js';
import { MAX_RUN_RETRIES } from './frozen-caps.constants.js';
import { NO_CONTROL_CHARS, storableText } from './text-rules.js';

/*
 * The RunSpec: what a client asks Cairn to run (camelCase, like the REST API). These schemas check
 * shape and sanity bounds only; whether the values are allowed (caps under FROZEN_CAPS, the image,
 * the egress hosts, the secrets) is policy's decision, made later and recorded.
 */

/** A human label: 1..128 characters, no control characters, no outer whitespace. */
export const RunNameSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(NO_CONTROL_CHARS, 'no control characters')
  .refine((s) => s.trim() === s, 'no leading or trailing whitespace');

/** `[registry[:port]/]path[:tag][@sha256:digest]`, as Docker spells a reference. */
export const ImageRefSchema = z
  .string()
  .max(255)
  .regex(
    /^(?:[a-z0-9.-]+(?::[0-9]{1,5})?\/)?[a-z0-9]+(?:(?:[._-]|__)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._-]|__)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$/,
    'an image reference such as cairn/sandbox:1 or registry:5000/name@sha256:…',
  );

/** A job groups runs under one budget; the name is used in keys, so it is a lower-case token. */
export const JobNameSchema = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'a job name is [a-z0-9_-], at most 64 characters');

export const EnvNameSchema = z.string().regex(/^[A-Z_][A-Z0-9_]{0,127}$/, 'an environment name is [A-Z_][A-Z0-9_]*');
/** Secrets are referenced by name only (I-7); the value lives in the secret store. */
export const SecretNameSchema = z.string().regex(/^[A-Z_][A-Z0-9_]{0,63}$/, 'a secret name is [A-Z_][A-Z0-9_]*, at most 64 characters');

/** One argv element: any text but NUL, which cannot cross exec. */
export const ArgSchema = z.string().max(32_768).check(storableText('an argument'));

/** I-3: a command is an argv array, never a shell string. */
export const ArgvSchema = z
  .array(ArgSchema, {
    error: (issue) =>
      typeof issue.input === 'string' ? 'argv must be an array of strings, not a shell string (I-3)' : undefined,
  })
  .min(1, 'argv needs at least the program')
  .max(4096)
  .refine((argv) => argv[0] !== '', 'argv[0] (the program) may not be empty');

const SEGMENT = /^[^\p{Cc}/\\]+$/u;

/**
 * An absolute, normalised path under one of `roots`: no `.`/`..` segments, no empty segments,
 * no trailing slash. `allowRoot` admits the root itself (`/out`), not only paths below it.
 */
export function sandboxPathSchema(roots: readonly string[], allowRoot: boolean) {
  const where = roots.join(', ');
  return z
    .string()
    .max(1024)
    .refine((path) => {
      const root = roots.find((r) => path === r || path.startsWith(`${r}/`));
      if (root === undefined) return false;
      if (path === root) return allowRoot;
      return path
        .slice(root.length + 1)
        .split('/')
        .every((segment) => SEGMENT.test(segment) && segment !== '.' && segment !== '..');
    }, `an absolute normalised path under ${where}${allowRoot ? '' : ' (below it, not the directory itself)'}`);
}

export const WorkdirSchema = sandboxPathSchema(['/work', '/out', '/tmp'], true);

/** The kernel's and the runtime's own trees: never a session's workdir or read (`/proc/self/fd/…`: CVE-2024-21626). */
const KERNEL_TREES = ['/proc', '/sys', '/dev', '/run', '/var/run'];

/**
 * An absolute, normalised path inside a sandbox, outside the kernel's and the runtime's trees (not `/`
 * itself): where a session's exec may start (`/usr/bin`) and what a session's read may name (the
 * image's `/etc/os-release`). Both run as the sandbox user, inside it.
 */
export const AnySandboxPathSchema = z
  .string()
  .max(1024)
  .refine(
    (path) =>
      path.startsWith('/') &&
      path.length > 1 &&
      path.slice(1).split('/').every((segment) => SEGMENT.test(segment) && segment !== '.' && segment !== '..') &&
      !KERNEL_TREES.some((tree) => path === tree || path.startsWith(`${tree}/`)),
    `an absolute normalised path (no empty, . or .. segments, no control characters), not under ${KERNEL_TREES.join(', ')}`,
  );
export const InputPathSchema = sandboxPathSchema(['/work'], false);
export const OutputPathSchema = sandboxPathSchema(['/work', '/out'], true);

export const EnvSchema = z
  .record(EnvNameSchema, z.string().max(32_768).check(storableText('an environment value')))
  .refine((env) => Object.keys(env).length <= 128, 'at most 128 environment variables');

export const StepNameSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'a step name is [A-Za-z0-9_.-], at most 64 characters');

export const StepSpecSchema = z.strictObject({
  name: StepNameSchema.optional(),
  argv: ArgvSchema,
  env: EnvSchema.optional(),
  workdir: WorkdirSchema.optional(),
  timeoutSeconds: z.number().int().positive().max(86_400).optional(),
  /** A step that changes something outside the sandbox; approval rules may hold the run before it. */
  apply: z.boolean().optional(),
});
export type StepSpec = z.infer<typeof StepSpecSchema>;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export const InputFileSchema = z
  .strictObject({
    path: InputPathSchema,
    /** The NUL a binary file holds is in its decoded bytes: base64 text never has one. */
    content: z
      .string()
      .max(16 * 1024 * 1024)
      .check(storableText('file content', '; send a binary file base64-encoded (encoding: base64)')),
    /** Absent means utf8. */
    encoding: z.enum(['utf8', 'base64']).optional(),
    mode: z.number().int().min(0).max(0o7777).optional(),
  })
  .refine((file) => file.encoding !== 'base64' || BASE64.test(file.content), {
    message: 'content is not valid base64',
    path: ['content'],
  });
export type InputFile = z.infer<typeof InputFileSchema>;

/** Shape and sanity bounds only; FROZEN_CAPS is policy's to enforce (refuse, never clamp). */
export const CapsSpecSchema = z.strictObject({
  wallSeconds: z.number().int().positive().max(1_000_000).optional(),
  memoryMiB: z.number().int().positive().max(1_048_576).optional(),
  pids: z.number().int().positive().max(1_000_000).optional(),
  diskMiB: z.number().int().positive().max(16_777_216).optional(),
  cpus: z.number().positive().max(1024).optional(),
});
export type CapsSpec = z.infer<typeof CapsSpecSchema>;

const HOST_PORT = /^([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*):([0-9]{1,5})$/;
export const HostPortSchema = z
  .string()
  .max(260)
  .regex(HOST_PORT, 'an egress entry is host:port with a lower-case host name')
  .refine((entry) => {
    const port = Number(entry.slice(entry.lastIndexOf(':') + 1));
    return port >= 1 && port <= 65_535;
  }, 'the port is 1..65535');

/** `none`, or the hosts the egress proxy may reach. Whether they are allowed is policy's call. */
export const NetworkSpecSchema = z.union([z.literal('none'), z.strictObject({ egress: z.array(HostPortSchema).min(1).max(64) })], {
  error: "network is 'none' or { egress: ['host:port', …] }",
});
export type NetworkSpec = z.infer<typeof NetworkSpecSchema>;

export const CHECK_OPS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'contains', 'not_contains', 'matches', 'sha256_eq', 'exists'] as const;
export const CheckOpSchema = z.enum(CHECK_OPS);
export type CheckOp = z.infer<typeof CheckOpSchema>;

const STEP_SOURCE = /^steps\[(0|[1-9][0-9]?)\]\.[a-z][a-z0-9_]*$/;
const ARTIFACT_SOURCE = /^artifacts\["(\/(?:work|out)(?:\/[^"\\\p{Cc}]+)?)"\](?:\.[a-z][a-z0-9_]*)*$/u;
const FACT_SOURCE = /^facts(?:\.[a-z][a-z0-9_]*)+$/;

/**
 * A source names a value the kernel produced: `steps[0].exit_code`, `steps[1].stdout`,
 * `artifacts["/out/x"]`, `artifacts["/out/r.json"].sha256`, `facts.junit.failed`.
 */
export const CheckSourceSchema = z
  .string()
  .max(1200)
  .refine(
    (s) => STEP_SOURCE.test(s) || ARTIFACT_SOURCE.test(s) || FACT_SOURCE.test(s),
    'a source is steps[i].<field>, artifacts["/work|/out/…"][.<field>] or facts.<name>[.<name>…]',
  );

/** The step index a source reads, if it reads a step. */
export function sourceStepIndex(source: string): number | null {
  const match = STEP_SOURCE.exec(source);
  return match?.[1] === undefined ? null : Number(match[1]);
}

/** The artifact path a source reads, if it reads an artifact. */
export function sourceArtifactPath(source: string): string | null {
  return ARTIFACT_SOURCE.exec(source)?.[1] ?? null;
}

export const CheckValueSchema = z.union([
  z.string().max(65_536).check(storableText('a check value', '; a matches pattern can name it as \\u0000')),
  z.number(),
  z.boolean(),
  z.null(),
]);
export type CheckValue = z.infer<typeof CheckValueSchema>;

export const CheckIdSchema = z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/, 'a check id is [a-z0-9_.-], at most 64 characters');

/** What each op needs as `value`, so a rubric that could never be evaluated is refused at the door. */
function checkValueProblem(op: CheckOp, value: CheckValue | undefined): string | null {
  switch (op) {
    case 'exists':
      return value === undefined ? null : 'exists takes no value';
    case 'lt':
    case 'lte':
    case 'gt':
    case 'gte':
      return typeof value === 'number' && Number.isFinite(value) ? null : `${op} needs a finite number value`;
    case 'contains':
    case 'not_contains':
      return typeof value === 'string' ? null : `${op} needs a string value`;
    case 'matches':
      if (typeof value !== 'string') return 'matches needs a regular expression string value';
      try {
        new RegExp(value, 'u');
        return null;
      } catch {
        return 'matches needs a valid regular expression';
      }
    case 'sha256_eq':
      return typeof value === 'string' && /^[0-9a-f]{64}$/.test(value) ? null : 'sha256_eq needs a lower-case hex sha256 value';
    case 'eq':
    case 'ne':
      return value === undefined ? `${op} needs a value` : null;
  }
}

const checkFields = {
  id: CheckIdSchema,
  source: CheckSourceSchema,
  op: CheckOpSchema,
  value: CheckValueSchema.optional(),
};

function refineCheckValue(check: { op: CheckOp; value?: CheckValue | undefined }, ctx: z.core.$RefinementCtx): void {
  const problem = checkValueProblem(check.op, check.value);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem, path: ['value'] });
}

/** A rubric criterion: a registered op over a value from a named source, worth `weight`. */
export const CheckSchema = z
  .strictObject({ ...checkFields, kind: z.literal('check').optional(), weight: z.number().positive().max(1_000_000) })
  .superRefine(refineCheckValue);
export type Check = z.infer<typeof CheckSchema>;

/**
 * A rubric criterion that earns a fraction of its weight: the number the first of `sources` that
 * resolves holds (a JSON number, or a file or output holding one as text, such as a Harbor task's
 * `reward.txt`), in [0, 1], times `weight`. Anything else leaves it unscored (docs/missions.md).
 */
export const RewardCriterionSchema = z.strictObject({
  id: CheckIdSchema,
  kind: z.literal('reward'),
  sources: z.array(CheckSourceSchema).min(1).max(4),
  weight: z.number().positive().max(1_000_000),
});
export type RewardCriterion = z.infer<typeof RewardCriterionSchema>;

/**
 * A rubric criterion scored by the operator's model (docs/adr/0030): the grader asks the judge
 * configured at the grader (`CAIRN_JUDGE_URL`) to score the text `source` names — a step's stdout
 * or stderr, or a collected file — against `criterion`, from 0 to `scale` (default 10); it earns
 * `weight × score / scale`. The workload's text is fenced as untrusted data; the criterion is the
 * instruction. A judge that fails records `grade.failed`, never a score (docs/missions.md).
 */
export const JudgeCriterionSchema = z.strictObject({
  id: CheckIdSchema,
  kind: z.literal('judge'),
  /** What the judge scores, in the rubric author's words (it rides the system role, never the workload's text). */
  criterion: z.string().min(1).max(2048).check(storableText('a criterion')),
  /** The workload's text the judge reads: `steps[i].stdout`, `steps[i].stderr` or `artifacts["/out/…"]`. */
  source: CheckSourceSchema.refine((s) => /^steps\[[0-9]+\]\.(?:stdout|stderr)$/.test(s) || /^artifacts\["[^"]+"\]$/.test(s), 'a judge reads steps[i].stdout, steps[i].stderr or artifacts["/out/…"]'),
  /** The top of the judge's score range (0..scale); 10 when absent. */
  scale: z.number().int().min(1).max(100).optional(),
  weight: z.number().positive().max(1_000_000),
});
export type JudgeCriterion = z.infer<typeof JudgeCriterionSchema>;

/** The top of a judge criterion's range when its `scale` is absent. */
export const DEFAULT_JUDGE_SCALE = 10;

/** A rubric entry: a check (the default kind), a reward read from the run, or a judge's score. */
export const RubricCriterionSchema = z.discriminatedUnion('kind', [CheckSchema, RewardCriterionSchema, JudgeCriterionSchema]);
export type RubricCriterion = Check | RewardCriterion | JudgeCriterion;

export function isJudgeCriterion(criterion: RubricCriterion): criterion is JudgeCriterion {
  return 'kind' in criterion && criterion.kind === 'judge';
}

export function isRewardCriterion(criterion: RubricCriterion): criterion is RewardCriterion {
  return 'kind' in criterion && criterion.kind === 'reward';
}

/** A claim's check is judged by the verifier (holds / contradicted / unreadable); it carries no weight. */
export const ClaimCheckSchema = z.strictObject(checkFields).superRefine(refineCheckValue);
export type ClaimCheck = z.infer<typeof ClaimCheckSchema>;

export const ClaimSchema = z.strictObject({
  statement: z.string().max(4096).check(storableText('a statement')).optional(),
  checks: z.array(ClaimCheckSchema).min(1).max(256),
});
export type Claim = z.infer<typeof ClaimSchema>;

/**
 * A regression gate's check (docs/adr/0004): one registered op, applied to the value `before` names
 * (read from what ran before the patch step: the baseline) and to the value `after` names (read from
 * what ran after it), e.g. `steps[0].exit_code` and `steps[2].exit_code` of the same test run twice.
 */
export const GateCheckSchema = z
  .strictObject({ id: CheckIdSchema, before: CheckSourceSchema, after: CheckSourceSchema, op: CheckOpSchema, value: CheckValueSchema.optional() })
  .superRefine(refineCheckValue);
export type GateCheck = z.infer<typeof GateCheckSchema>;

/** The path of a patch artifact: a collected file, not the output directory itself. */
export const PatchPathSchema = sandboxPathSchema(['/work', '/out'], false);

/**
 * A regression gate over a patch step (docs/adr/0004). Every check must hold after the patch;
 * the verifier judges it, and a gate that fails ends the run `ROLLBACK` `E_GATE_FAIL` with the
 * patch artifact marked rejected.
 */
export const GateSpecSchema = z.strictObject({
  /** The step that applies the patch: its index in `steps`, or its name. */
  patchStep: z.union([z.number().int().min(0).max(63), StepNameSchema]),
  /** The patch artifact: a file the run collects (under `outputs`), e.g. the diff the patch step wrote. */
  patch: PatchPathSchema,
  checks: z.array(GateCheckSchema).min(1).max(64),
});
export type GateSpec = z.infer<typeof GateSpecSchema>;

/**
 * The index of the gate's patch step in `steps`, or null when `patchStep` names no step, or a
 * name more than one step has.
 */
export function gatePatchStepIndex(gate: Pick<GateSpec, 'patchStep'>, steps: readonly Pick<StepSpec, 'name'>[]): number | null {
  if (typeof gate.patchStep === 'number') return gate.patchStep < steps.length ? gate.patchStep : null;
  const named = steps.flatMap((step, index) => (step.name === gate.patchStep ? [index] : []));
  return named.length === 1 ? named[0]! : null;
}

const IMAGE_ID = /^sha256:[0-9a-f]{64}$/;

/**
 * How the run's image was built from a Dockerfile (docs/adr/0018), recorded with the run on its
 * chain: the build's digest (sha256 of the context tar, Dockerfile included), the Dockerfile's
 * sha256, the local base images by id, and the image id the build gave — which `image` must pin.
 */
export const ImageBuildSchema = z.strictObject({
  digest: z.string().regex(/^[0-9a-f]{64}$/, 'a lower-case hex sha256'),
  dockerfileSha256: z.string().regex(/^[0-9a-f]{64}$/, 'a lower-case hex sha256'),
  bases: z.array(z.strictObject({ ref: ImageRefSchema, id: z.string().regex(IMAGE_ID, 'an image id sha256:…') })).max(16),
  imageId: z.string().regex(IMAGE_ID, 'an image id sha256:…'),
  cached: z.boolean(),
});
export type ImageBuild = z.infer<typeof ImageBuildSchema>;

function duplicates(values: readonly string[]): string[] {
  const seen = new Set<string>();
  const repeated = new Set<string>();
  for (const value of values) (seen.has(value) ? repeated : seen).add(value);
  return [...repeated];
}

export const RunSpecSchema = z
  .strictObject({
    name: RunNameSchema,
    /** Absent: policy's default image. */
    image: ImageRefSchema.optional(),
    job: JobNameSchema.optional(),
    steps: z.array(StepSpecSchema).min(1).max(64),
    files: z.array(InputFileSchema).max(256).optional(),
    outputs: z.array(OutputPathSchema).max(64).optional(),
    caps: CapsSpecSchema.optional(),
    network: NetworkSpecSchema.optional(),
    secrets: z.array(SecretNameSchema).max(32).optional(),
    /** The rubric the grader scores. */
    checks: z.array(RubricCriterionSchema).max(256).optional(),
    claim: ClaimSchema.optional(),
    gate: GateSpecSchema.optional(),
    imageBuild: ImageBuildSchema.optional(),
    /**
     * Attempts after the first when the worker holding the run is lost (ADR 0035), 0–3; absent is 0.
     * A step's own failure, a cap, a secret seen, a cancel or a refusal is never retried.
     */
    retries: z.number().int().min(0).max(MAX_RUN_RETRIES).optional(),
  })
  .superRefine((spec, ctx) => {
    const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message });
    if (spec.imageBuild !== undefined && !(spec.image ?? '').endsWith(`@${spec.imageBuild.imageId}`)) {
      issue(['image'], `an image built from a Dockerfile is named by its id: image must end @${spec.imageBuild.imageId}`);
    }
    for (const path of duplicates((spec.files ?? []).map((f) => f.path))) issue(['files'], `duplicate input path ${path}`);
    for (const path of duplicates(spec.outputs ?? [])) issue(['outputs'], `duplicate output path ${path}`);
    for (const name of duplicates(spec.secrets ?? [])) issue(['secrets'], `duplicate secret ${name}`);
    for (const id of duplicates((spec.checks ?? []).map((c) => c.id))) issue(['checks'], `duplicate check id ${id}`);
    for (const id of duplicates((spec.claim?.checks ?? []).map((c) => c.id))) issue(['claim', 'checks'], `duplicate check id ${id}`);

    const secrets = new Set(spec.secrets ?? []);
    spec.steps.forEach((step, i) => {
      for (const name of Object.keys(step.env ?? {})) {
        if (secrets.has(name)) issue(['steps', i, 'env', name], `${name} is a secret; it cannot also be set in env`);
      }
    });

    // A source must point at something the run will have: an existing step, a collected output.
    const outputs = spec.outputs ?? [];
    const sourced: [(string | number)[], string][] = [
      ...(spec.checks ?? []).flatMap((check, i): [(string | number)[], string][] =>
        isRewardCriterion(check) ? check.sources.map((source, j) => [['checks', i, 'sources', j], source]) : [[['checks', i, 'source'], check.source]],
      ),
      ...(spec.claim?.checks ?? []).map((check, i): [(string | number)[], string] => [['claim', 'checks', i, 'source'], check.source]),
    ];
    for (const [path, source] of sourced) {
      const step = sourceStepIndex(source);
      if (step !== null && step >= spec.steps.length) issue(path, `${source} names a step the spec does not have`);
      const artifact = sourceArtifactPath(source);
      if (artifact !== null && !outputs.some((out) => artifact === out || artifact.startsWith(`${out}/`))) {
        issue(path, `${source} is not under any collected output`);
      }
    }
    if (spec.gate !== undefined) gateIssues(spec.gate, spec.steps, outputs).forEach(({ path, message }) => issue(['gate', ...path], message));
  });
export type RunSpec = z.infer<typeof RunSpecSchema>;

/**
 * What makes a gate unusable with its run: a patch step that is not exactly one step, a patch
 * artifact the run does not collect, a check whose two sources are the same value, a `before`
 * step that is not before the patch step or an `after` step that is not after it.
 */
function gateIssues(gate: GateSpec, steps: readonly StepSpec[], outputs: readonly string[]): { path: (string | number)[]; message: string }[] {
  const issues: { path: (string | number)[]; message: string }[] = [];
  const patchStep = gatePatchStepIndex(gate, steps);
  if (patchStep === null) {
    const named = typeof gate.patchStep === 'string' ? steps.filter((step) => step.name === gate.patchStep).length : 0;
    issues.push({
      path: ['patchStep'],
      message:
        typeof gate.patchStep === 'number'
          ? `step ${gate.patchStep} does not exist (the spec has ${steps.length} steps)`
          : named === 0
            ? `no step is named ${gate.patchStep}`
            : `${named} steps are named ${gate.patchStep}; name the patch step uniquely or give its index`,
    });
  }
  if (!outputs.some((out) => gate.patch === out || gate.patch.startsWith(`${out}/`))) {
    issues.push({ path: ['patch'], message: `${gate.patch} is not under any collected output` });
  }
  for (const id of duplicates(gate.checks.map((c) => c.id))) issues.push({ path: ['checks'], message: `duplicate check id ${id}` });
  gate.checks.forEach((check, i) => {
    if (check.before === check.after) issues.push({ path: ['checks', i, 'after'], message: 'before and after name the same value; a gate compares two' });
    for (const side of ['before', 'after'] as const) {
      const source = check[side];
      const step = sourceStepIndex(source);
      if (step !== null && step >= steps.length) issues.push({ path: ['checks', i, side], message: `${source} names a step the spec does not have` });
      else if (step !== null && patchStep !== null && (side === 'before' ? step >= patchStep : step <= patchStep)) {
        issues.push({ path: ['checks', i, side], message: `${source} must name a step ${side} the patch step (step ${patchStep})` });
      }
      const artifact = sourceArtifactPath(source);
      if (artifact !== null && !outputs.some((out) => artifact === out || artifact.startsWith(`${out}/`))) {
        issues.push({ path: ['checks', i, side], message: `${source} is not under any collected output` });
      }
    }
  });
  return issues;
}

/** `steps[0].argv` style, as people read paths. */
export function formatIssuePath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else if (typeof key === 'string' && /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key)) out += out === '' ? key : `.${key}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out === '' ? '(root)' : out;
}

export interface InputIssue {
  path: string;
  message: string;
}

/** Zod's issues as `{ path, message }`; an unknown key is reported at its own path, so `privileged` is named. */
export function inputIssues(error: z.ZodError): InputIssue[] {
  return error.issues.flatMap((issue) => {
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ path: formatIssuePath([...issue.path, key]), message: 'unknown field' }));
    }
    // A bad record key: say what a key must look like, not only that it is wrong.
    const message = issue.code === 'invalid_key' ? (issue.issues.map((inner) => inner.message).join('; ') || issue.message) : issue.message;
    return [{ path: formatIssuePath(issue.path), message }];
  });
}

/** Parses a RunSpec or throws `E_INPUT` whose message names every offending field path. */
export function parseRunSpec(input: unknown): RunSpec {
  const result = RunSpecSchema.safeParse(input);
  if (result.success) return result.data;
  const issues = inputIssues(result.error);
  throw new CairnError('E_INPUT', `invalid RunSpec: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
}
