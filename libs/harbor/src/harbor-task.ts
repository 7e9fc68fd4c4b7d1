import { CairnError, HarborTaskPathSchema, ImageRefSchema, parseRunSpec } from '@cairn/contracts';
import type { InputFile, RubricCriterion, RunSpec, StepSpec } from '@cairn/contracts';
import { SIZE, parseTaskToml } from './task-toml.schema.js';
import type { HarborJudge, HarborTaskToml } from './task-toml.schema.js';

/*
 * A Harbor / Terminal-Bench task as a Cairn mission (docs/missions.md, docs/adr/0034): the one
 * mapping `cairn run <task-dir>` and `POST /v1/missions/harbor` share. It works on the task's files
 * in memory — read from a directory by the CLI and the SDKs, decoded from JSON by the gateway — so
 * the checks on them (paths, parts, limits) are the same wherever a task comes from.
 */

/** Where things sit inside the sandbox. /logs, /tests and /solution are symlinks in the image (read-only root). */
export const HARBOR_PATHS = Object.freeze({
  logs: '/out/harbor-logs',
  reward: '/out/harbor-logs/verifier/reward.txt',
  rewardJson: '/out/harbor-logs/verifier/reward.json',
  instruction: '/work/harbor/instruction.md',
  solution: '/work/harbor/solution',
  /** The tests of a task whose image Cairn did not build for it (over REST): input files, linked from /tests. */
  inputTests: '/work/harbor/tests',
  tests: '/tests',
});

/** A file of the task, its path relative to the task directory (`tests/test.sh`). */
export interface TaskFile {
  path: string;
  content: Uint8Array;
  /** 0o755 (executable) or 0o644. */
  mode: number;
}

export interface HarborTask {
  /** Where the task came from, for messages (its directory, or `upload`). */
  where: string;
  name: string;
  config: HarborTaskToml;
  instruction: string;
  dockerfile: string;
  /** environment/ files other than the Dockerfile, as given (the CLI builds from the directory instead). */
  environment: TaskFile[];
  tests: TaskFile[];
  solution: TaskFile[];
}

export type AgentStep = { kind: 'oracle' } | { kind: 'agent'; argv: string[] };

/**
 * How the task's image holds the Harbor layout: `built` — Cairn built it from environment/Dockerfile
 * with the tests in its read-only root (`harborImageAdditions`); `prebuilt` — an image already there
 * whose /logs and /tests link into /out/harbor-logs and /work/harbor/tests, the tests given as input files.
 */
export type HarborLayout = 'built' | 'prebuilt';

export interface HarborLimits {
  files: number;
  bytes: number;
}

function inputError(message: string, details: Record<string, unknown> = {}): CairnError {
  return new CairnError('E_INPUT', message, details);
}

const TOP_LEVEL_FILES = ['task.toml', 'instruction.md'];
const TOP_LEVEL_DIRS = ['environment', 'tests', 'solution'];

function utf8(file: TaskFile, where: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(file.content);
  } catch {
    throw inputError(`${where}/${file.path} is not UTF-8 text`, { path: file.path });
  }
}

/**
 * The task the files make: task.toml, instruction.md, environment/Dockerfile and tests/test.sh are
 * needed; anything outside task.toml, instruction.md, environment/, tests/ and solution/ is refused,
 * as is a path that could leave the directory. Every refusal is E_INPUT naming the file or field.
 */
export function harborTaskFromFiles(files: readonly TaskFile[], options: { where: string; name: string; limits?: HarborLimits }): HarborTask {
  const { where, limits } = options;
  if (limits !== undefined) {
    if (files.length > limits.files) throw inputError(`${where}: ${files.length} files; a task may have at most ${limits.files}`, { files: files.length, limit: limits.files });
    const bytes = files.reduce((sum, file) => sum + file.content.byteLength, 0);
    if (bytes > limits.bytes) throw inputError(`${where}: ${bytes} bytes of files; a task may have at most ${limits.bytes}`, { bytes, limit: limits.bytes });
  }
  const byPath = new Map<string, TaskFile>();
  for (const file of files) {
    const path = HarborTaskPathSchema.safeParse(file.path);
    if (!path.success) throw inputError(`${where}: ${JSON.stringify(file.path)}: ${path.error.issues.map((i) => i.message).join('; ')}`, { path: file.path });
    const [top] = file.path.split('/');
    const inside = file.path.includes('/');
    if (inside ? !TOP_LEVEL_DIRS.includes(top ?? '') : !TOP_LEVEL_FILES.includes(file.path)) {
      throw inputError(`${where}: ${file.path} is not part of a Harbor task (task.toml, instruction.md, environment/, tests/, solution/)`, { path: file.path });
    }
    if (byPath.has(file.path)) throw inputError(`${where}: ${file.path} is given twice`, { path: file.path });
    byPath.set(file.path, { path: file.path, content: file.content, mode: file.mode & 0o111 ? 0o755 : 0o644 });
  }
  const need = (path: string): TaskFile => {
    const file = byPath.get(path);
    if (file === undefined) throw inputError(`${where}/${path} is missing: a Harbor task has ${path}`, { path });
    return file;
  };
  const config = parseTaskToml(utf8(need('task.toml'), where), `${where}/task.toml`);
  const instruction = utf8(need('instruction.md'), where);
  const dockerfile = utf8(need('environment/Dockerfile'), where);
  need('tests/test.sh');
  const under = (dir: string) => [...byPath.values()].filter((f) => f.path.startsWith(`${dir}/`)).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const name = (config.task?.name ?? options.name).replace(/[^A-Za-z0-9._/-]+/g, '-');
  return {
    where,
    name,
    config,
    instruction,
    dockerfile,
    environment: under('environment').filter((f) => f.path !== 'environment/Dockerfile'),
    tests: under('tests'),
    solution: under('solution'),
  };
}

/**
 * The image of a task whose image is not built for it: its environment/Dockerfile must be one
 * `FROM <image>` (comments and blank lines aside) and environment/ hold nothing else. Whether that
 * image may run is policy's to decide, as for any RunSpec.
 */
export function prebuiltEnvironmentImage(task: HarborTask): string {
  const refuse = (why: string) =>
    inputError(`${task.where}/environment/Dockerfile: ${why}; over REST the environment is an image already there: a Dockerfile of one line, FROM <image> (build it first with cairn images build, docs/missions.md)`, { path: 'environment/Dockerfile' });
  const lines = task.dockerfile.split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== '' && !line.startsWith('#'));
  if (lines.length !== 1) throw refuse(`${lines.length} instructions, and no image is built here`);
  const match = /^FROM\s+(\S+)$/i.exec(lines[0] ?? '');
  if (match === null) throw refuse(`${JSON.stringify(lines[0])} is not FROM <image>`);
  const ref = match[1] ?? '';
  if (!ImageRefSchema.safeParse(ref).success) throw refuse(`${JSON.stringify(ref)} is not an image reference`);
  if (task.environment.length > 0) throw refuse(`environment/ holds ${task.environment.map((f) => f.path).join(', ')}, a build context nothing would use`);
  return ref;
}

/**
 * What the image build adds on top of the task's Dockerfile: the tests, in the read-only root where
 * the agent cannot change them, and `/logs` and `/solution` as symlinks into writable places.
 */
export function harborImageAdditions(task: HarborTask): { dockerfile: string; files: { path: string; content: Uint8Array; mode: number }[] } {
  const files = task.tests.map((file) => ({ path: `.cairn-harbor${HARBOR_PATHS.tests}${file.path.slice('tests'.length)}`, content: file.content, mode: file.mode }));
  const tail = [
    '',
    '# Added by Cairn (docs/missions.md): the task\'s tests, and /logs and /solution in writable places.',
    // Root only to place these; every step still runs as the sandbox user, whatever USER says.
    'USER 0:0',
    // An image made ready for Harbor tasks before builds were served over REST links /tests into /work: the copy replaces the link.
    'RUN ["/bin/sh", "-c", "[ ! -L /tests ] || rm -f /tests"]',
    'COPY .cairn-harbor/ /',
    `RUN ["/bin/sh", "-c", "ln -sfn ${HARBOR_PATHS.logs} /logs && ln -sfn ${HARBOR_PATHS.solution} /solution"]`,
    '',
  ].join('\n');
  return { dockerfile: `${task.dockerfile.replace(/\s*$/, '')}\n${tail}`, files };
}

/**
 * What a worker builds for a task sent over REST (docs/adr/0038): the Dockerfile with the Harbor
 * additions, and the context — environment/'s files at its root, the tests under .cairn-harbor/ —
 * as `cairn run <task-dir>` builds it from the directory. Modes are permission bits only.
 */
export function harborBuildContext(task: HarborTask): { dockerfile: string; files: { path: string; content: Uint8Array; mode: number }[] } {
  const additions = harborImageAdditions(task);
  // The Dockerfile is in the context too, as it is in the directory `cairn run` builds from.
  const dockerfile = { path: 'Dockerfile', content: new TextEncoder().encode(task.dockerfile), mode: 0o644 };
  const environment = [dockerfile, ...task.environment.map((file) => ({ path: file.path.slice('environment/'.length), content: file.content, mode: file.mode }))];
  if (environment.some((file) => file.path === '.cairn-harbor' || file.path.startsWith('.cairn-harbor/') || file.path === '.cairn-build' || file.path.startsWith('.cairn-build/'))) {
    throw inputError(`${task.where}/environment/: .cairn-harbor/ and .cairn-build/ are Cairn's own names in the build context`, { path: 'environment/' });
  }
  return { dockerfile: additions.dockerfile, files: [...environment, ...additions.files] };
}

/** The lines a Dockerfile adds to make an image ready for Harbor tasks sent over REST (docs/missions.md). */
export const HARBOR_PREBUILT_LINKS = `ln -sfn ${HARBOR_PATHS.logs} /logs && ln -sfn ${HARBOR_PATHS.inputTests} /tests && ln -sfn ${HARBOR_PATHS.solution} /solution`;

function megabytes(size: string): number {
  const match = SIZE.exec(size);
  const value = Number(match?.[1]);
  const unit = (match?.[2] ?? 'M').toUpperCase();
  return Math.max(1, Math.round(unit === 'G' ? value * 1024 : unit === 'K' ? value / 1024 : value));
}

/** The Harbor layout's caps: only the limits the task sets; the rest are policy's defaults. */
function capsOf(config: HarborTaskToml): RunSpec['caps'] {
  const environment = config.environment ?? {};
  const memory = environment.memory_mb ?? (environment.memory === undefined ? undefined : megabytes(environment.memory));
  const disk = environment.storage_mb ?? (environment.storage === undefined ? undefined : megabytes(environment.storage));
  const agentSeconds = config.agent?.timeout_sec ?? undefined;
  const verifierSeconds = config.verifier?.timeout_sec;
  const wall = agentSeconds === undefined && verifierSeconds === undefined ? undefined : Math.ceil(Math.max(agentSeconds ?? 0, verifierSeconds ?? 0));
  const caps = {
    ...(wall === undefined ? {} : { wallSeconds: wall }),
    ...(memory === undefined ? {} : { memoryMiB: memory }),
    ...(disk === undefined ? {} : { diskMiB: disk }),
    ...(environment.cpus === undefined ? {} : { cpus: environment.cpus }),
  };
  return Object.keys(caps).length === 0 ? undefined : caps;
}

function networkOf(config: HarborTaskToml): RunSpec['network'] {
  const environment = config.environment ?? {};
  const hosts = environment.allowed_hosts ?? [];
  if (hosts.length > 0 && environment.network_mode !== undefined && environment.network_mode !== 'allowlist') {
    throw inputError(`task.toml: environment.allowed_hosts: only with network_mode = 'allowlist'`, { path: 'environment.allowed_hosts' });
  }
  // Harbor's default (allow_internet, 'public') has no Cairn equivalent: Cairn denies egress unless hosts are named.
  return hosts.length === 0 ? 'none' : { egress: hosts.map((host) => `${host}:443`) };
}

/** Step 1 is the agent (or the oracle), step 2 the verifier: see harborRunSpec. */
const STEP_OF = { agent: 1, verifier: 2 } as const;

/** A `[[verifier.judge]]` entry as the RunSpec's `kind: judge` criterion (ADR 0030). */
export function judgeCriterion(judge: HarborJudge): RubricCriterion {
  const stream = /^(agent|verifier)\.(stdout|stderr)$/.exec(judge.source);
  const source = stream === null ? `artifacts["${HARBOR_PATHS.logs}${judge.source.slice('/logs'.length)}"]` : `steps[${STEP_OF[stream[1] as 'agent' | 'verifier']}].${stream[2] ?? 'stdout'}`;
  return { id: judge.id, kind: 'judge', criterion: judge.criterion, source, weight: judge.weight ?? 1, ...(judge.scale === undefined ? {} : { scale: judge.scale }) };
}

function base64(content: Uint8Array): string {
  return Buffer.from(content.buffer, content.byteOffset, content.byteLength).toString('base64');
}

/**
 * The RunSpec for a task: a setup step (the log directories), the agent step (the oracle's
 * solve.sh, or the agent's argv with the instruction at HARBOR_INSTRUCTION_FILE), and tests/test.sh
 * as the verifying step; the reward it writes is the first rubric criterion, the task's judges the rest.
 */
export function harborRunSpec(task: HarborTask, target: { image: string; layout: HarborLayout }, agent: AgentStep, job?: string): RunSpec {
  const config = task.config;
  const environmentEnv = config.environment?.env ?? {};
  const files: InputFile[] = [{ path: HARBOR_PATHS.instruction, content: task.instruction }];
  let agentStep: StepSpec;
  const agentTimeout = config.agent?.timeout_sec ?? undefined;
  const timeout = agentTimeout === undefined ? {} : { timeoutSeconds: Math.ceil(agentTimeout) };
  if (agent.kind === 'oracle') {
    if (!task.solution.some((file) => file.path === 'solution/solve.sh')) throw inputError(`${task.where}/solution/solve.sh is missing: --oracle runs it as the agent`, { path: 'solution/solve.sh' });
    for (const file of task.solution) {
      files.push({ path: `${HARBOR_PATHS.solution}${file.path.slice('solution'.length)}`, content: base64(file.content), encoding: 'base64', mode: file.mode });
    }
    agentStep = { name: 'oracle', argv: [`${HARBOR_PATHS.solution}/solve.sh`], env: { ...environmentEnv, ...config.solution?.env }, ...timeout };
  } else {
    agentStep = { name: 'agent', argv: agent.argv, env: { ...environmentEnv, HARBOR_INSTRUCTION_FILE: HARBOR_PATHS.instruction }, ...timeout };
  }
  const mkdirLogs = ['mkdir', '-p', `${HARBOR_PATHS.logs}/agent`, `${HARBOR_PATHS.logs}/verifier`];
  let setup: StepSpec = { name: 'setup', argv: mkdirLogs };
  if (target.layout === 'prebuilt') {
    for (const file of task.tests) files.push({ path: `${HARBOR_PATHS.inputTests}${file.path.slice('tests'.length)}`, content: base64(file.content), encoding: 'base64', mode: file.mode });
    // An image without the links would lose the reward: the run stops here, saying why.
    const ready = `[ "$(readlink /logs)" = ${HARBOR_PATHS.logs} ] && [ "$(readlink /tests)" = ${HARBOR_PATHS.inputTests} ] || { echo 'this image is not ready for Harbor tasks: it needs /logs -> ${HARBOR_PATHS.logs} and /tests -> ${HARBOR_PATHS.inputTests} (docs/missions.md)' >&2; exit 64; }`;
    setup = { name: 'setup', argv: ['sh', '-c', `${mkdirLogs.join(' ')} && ${ready}`] };
  }
  const verifierTimeout = config.verifier?.timeout_sec;
  const steps: StepSpec[] = [
    setup,
    agentStep,
    {
      name: 'verify',
      // The agent could have written a reward of its own: the verifier's directory starts empty.
      argv: ['sh', '-c', `rm -rf ${HARBOR_PATHS.logs}/verifier && mkdir -p ${HARBOR_PATHS.logs}/verifier && exec ${HARBOR_PATHS.tests}/test.sh`],
      env: { ...environmentEnv, ...config.verifier?.env },
      ...(verifierTimeout === undefined ? {} : { timeoutSeconds: Math.ceil(verifierTimeout) }),
    },
  ];
  const caps = capsOf(config);
  const reward: RubricCriterion = { id: 'reward', kind: 'reward', sources: [`artifacts["${HARBOR_PATHS.reward}"]`, `artifacts["${HARBOR_PATHS.rewardJson}"].json.reward`], weight: 1 };
  const spec = {
    name: `harbor: ${task.name}`.slice(0, 128),
    image: target.image,
    ...(job === undefined ? {} : { job }),
    steps: steps.map(({ env: e, ...rest }) => (e === undefined || Object.keys(e).length === 0 ? rest : { ...rest, env: e })),
    files,
    outputs: [HARBOR_PATHS.logs],
    ...(caps === undefined ? {} : { caps }),
    network: networkOf(config),
    checks: [reward, ...(config.verifier?.judge ?? []).map(judgeCriterion)],
  };
  try {
    return parseRunSpec(spec);
  } catch (error) {
    throw inputError(`the RunSpec made from ${task.where}: ${(error as Error).message}`, { path: task.where });
  }
}
