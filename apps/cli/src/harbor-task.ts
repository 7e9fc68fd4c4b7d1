import { lstat, readdir, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { inputIssues, parseRunSpec } from '@cairn/contracts';
import type { InputFile, RunSpec, StepSpec } from '@cairn/contracts';
import { parse as parseToml } from 'smol-toml';
import { z } from 'zod';
import { usageError } from './exit-codes.js';

/*
 * A Harbor / Terminal-Bench task directory as a Cairn mission (docs/missions.md): task.toml,
 * instruction.md, environment/Dockerfile, tests/test.sh, optional solution/solve.sh. Every field of
 * task.toml is either mapped or refused by name (E_INPUT): nothing is silently ignored but metadata.
 */

const seconds = z.number().positive().max(86_400);
const env = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment name'), z.string().refine((v) => !v.includes('${'), 'a ${VAR} template (Cairn passes no host variables; use a secret)'));
const unsupported = (what: string) => z.unknown().refine((value) => value === undefined || value === null || (Array.isArray(value) && value.length === 0), `${what} is not supported by Cairn yet`);
const notAUser = z.unknown().refine((value) => value === undefined || value === null, 'Cairn runs every step as its sandbox user; remove user');
const SIZE = /^([0-9]+(?:\.[0-9]+)?)\s*([KMG])$/i;

/** task.toml, as Harbor's TaskConfig (schema 1.x) reads it. */
export const HarborTaskTomlSchema = z.strictObject({
  version: z.string().optional(),
  schema_version: z.string().optional(),
  source: z.string().optional(),
  task: z
    .strictObject({
      name: z.string().min(1).max(200),
      description: z.string().optional(),
      authors: z.array(z.strictObject({ name: z.string(), email: z.string().optional() })).optional(),
      keywords: z.array(z.string()).optional(),
    })
    .optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  verifier: z
    .strictObject({
      timeout_sec: seconds.optional(),
      env: env.optional(),
      user: notAUser.optional(),
      network_mode: unsupported('a verifier network of its own').optional(),
      allowed_hosts: unsupported('a verifier network of its own').optional(),
    })
    .optional(),
  agent: z
    .strictObject({
      timeout_sec: seconds.nullable().optional(),
      user: notAUser.optional(),
      network_mode: unsupported('an agent network of its own').optional(),
      allowed_hosts: unsupported('an agent network of its own').optional(),
    })
    .optional(),
  environment: z
    .strictObject({
      build_timeout_sec: seconds.optional(),
      docker_image: unsupported('a prebuilt docker_image (Cairn builds environment/Dockerfile)').optional(),
      cpus: z.number().positive().max(1024).optional(),
      memory_mb: z.number().int().positive().optional(),
      storage_mb: z.number().int().positive().optional(),
      memory: z.string().regex(SIZE, "a size such as '2G' or '512M'").optional(),
      storage: z.string().regex(SIZE, "a size such as '2G' or '512M'").optional(),
      gpus: z.literal(0, 'GPUs are not supported by Cairn').optional(),
      gpu_types: unsupported('gpu_types').optional(),
      allow_internet: z.boolean().optional(),
      network_mode: z.enum(['public', 'no-network', 'allowlist']).optional(),
      allowed_hosts: z.array(z.string().regex(/^[a-z0-9.-]+$/, 'a host name')).max(64).optional(),
      mcp_servers: unsupported('mcp_servers').optional(),
      env: env.optional(),
      skills_dir: unsupported('skills_dir').optional(),
      healthcheck: unsupported('healthcheck').optional(),
    })
    .optional(),
  solution: z.strictObject({ env: env.optional() }).optional(),
});
export type HarborTaskToml = z.infer<typeof HarborTaskTomlSchema>;

/** Where things sit inside the sandbox. /logs is a symlink the image build adds (read-only root). */
export const HARBOR_PATHS = Object.freeze({
  logs: '/out/harbor-logs',
  reward: '/out/harbor-logs/verifier/reward.txt',
  rewardJson: '/out/harbor-logs/verifier/reward.json',
  instruction: '/work/harbor/instruction.md',
  solution: '/work/harbor/solution',
  tests: '/tests',
});

export interface HarborTask {
  dir: string;
  name: string;
  config: HarborTaskToml;
  instruction: string;
  dockerfile: string;
  /** The environment/ directory: the build context. */
  contextDir: string;
  /** tests/ and solution/ files, relative to the task dir. */
  tests: TaskFile[];
  solution: TaskFile[];
}

export interface TaskFile {
  path: string;
  content: Buffer;
  mode: number;
}

async function isFile(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => null))?.isFile() === true;
}

/** A directory with a task.toml is a Harbor task. */
export function isHarborTaskDir(dir: string): Promise<boolean> {
  return isFile(join(dir, 'task.toml'));
}

function megabytes(size: string): number {
  const match = SIZE.exec(size);
  const value = Number(match?.[1]);
  const unit = (match?.[2] ?? 'M').toUpperCase();
  return Math.max(1, Math.round(unit === 'G' ? value * 1024 : unit === 'K' ? value / 1024 : value));
}

/** Parses and validates task.toml: a bad or unknown field is E_INPUT naming it (`environment.gpus`). */
export function parseTaskToml(text: string, where: string): HarborTaskToml {
  let document: unknown;
  try {
    document = parseToml(text);
  } catch (error) {
    throw usageError(`${where}: not valid TOML: ${(error as Error).message.split('\n')[0] ?? ''}`, { path: where });
  }
  const result = HarborTaskTomlSchema.safeParse(document);
  if (result.success) return result.data;
  const issues = inputIssues(result.error);
  throw usageError(`${where}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { path: where, issues });
}

async function filesUnder(root: string, relative: string): Promise<TaskFile[]> {
  const dir = join(root, relative);
  const info = await lstat(dir).catch(() => null);
  if (info === null) return [];
  if (!info.isDirectory()) throw usageError(`${dir} is not a directory`);
  const out: TaskFile[] = [];
  for (const name of (await readdir(dir)).sort()) {
    const path = `${relative}/${name}`;
    const entry = await lstat(join(root, path));
    if (entry.isDirectory()) out.push(...(await filesUnder(root, path)));
    else if (entry.isFile()) out.push({ path, content: await readFile(join(root, path)), mode: entry.mode & 0o111 ? 0o755 : 0o644 });
    else throw usageError(`${join(root, path)}: only files and directories may be in a task's ${relative.split('/')[0] ?? ''}/`);
  }
  return out;
}

/** Reads a task directory; what is missing or malformed is E_INPUT naming the file or field. */
export async function readHarborTask(dir: string): Promise<HarborTask> {
  const config = parseTaskToml(await readFile(join(dir, 'task.toml'), 'utf8'), join(dir, 'task.toml'));
  const need = async (relative: string) => {
    if (!(await isFile(join(dir, relative)))) throw usageError(`${join(dir, relative)} is missing: a Harbor task has ${relative}`, { path: join(dir, relative) });
    return readFile(join(dir, relative), 'utf8');
  };
  const instruction = await need('instruction.md');
  const dockerfile = await need('environment/Dockerfile');
  await need('tests/test.sh');
  const name = (config.task?.name ?? basename(dir)).replace(/[^A-Za-z0-9._/-]+/g, '-');
  return {
    dir,
    name,
    config,
    instruction,
    dockerfile,
    contextDir: join(dir, 'environment'),
    tests: await filesUnder(dir, 'tests'),
    solution: await filesUnder(dir, 'solution'),
  };
}

/**
 * What the image build adds on top of the task's Dockerfile: the tests, in the read-only root where
 * the agent cannot change them, and `/logs` and `/solution` as symlinks into writable places.
 */
export function harborImageAdditions(task: HarborTask): { dockerfile: string; files: { path: string; content: Buffer | string; mode: number }[] } {
  const files = task.tests.map((file) => ({ path: `.cairn-harbor${HARBOR_PATHS.tests}${file.path.slice('tests'.length)}`, content: file.content, mode: file.mode }));
  const tail = [
    '',
    '# Added by Cairn (docs/missions.md): the task\'s tests, and /logs and /solution in writable places.',
    // Root only to place these; every step still runs as the sandbox user, whatever USER says.
    'USER 0:0',
    'COPY .cairn-harbor/ /',
    `RUN ["/bin/sh", "-c", "ln -sfn ${HARBOR_PATHS.logs} /logs && ln -sfn ${HARBOR_PATHS.solution} /solution"]`,
    '',
  ].join('\n');
  return { dockerfile: `${task.dockerfile.replace(/\s*$/, '')}\n${tail}`, files };
}

export type AgentStep = { kind: 'oracle' } | { kind: 'agent'; argv: string[] };

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
    throw usageError(`task.toml: environment.allowed_hosts: only with network_mode = 'allowlist'`);
  }
  // Harbor's default (allow_internet, 'public') has no Cairn equivalent: Cairn denies egress unless hosts are named.
  return hosts.length === 0 ? 'none' : { egress: hosts.map((host) => `${host}:443`) };
}

/**
 * The RunSpec for a task: a setup step (the log directories), the agent step (the oracle's
 * solve.sh, or the agent's argv with the instruction at HARBOR_INSTRUCTION_FILE), and tests/test.sh
 * as the verifying step; the reward it writes is the one rubric criterion.
 */
export function harborRunSpec(task: HarborTask, image: string, agent: AgentStep, job?: string): RunSpec {
  const config = task.config;
  const environmentEnv = config.environment?.env ?? {};
  const files: InputFile[] = [{ path: HARBOR_PATHS.instruction, content: task.instruction }];
  let agentStep: StepSpec;
  const agentTimeout = config.agent?.timeout_sec ?? undefined;
  const timeout = agentTimeout === undefined ? {} : { timeoutSeconds: Math.ceil(agentTimeout) };
  if (agent.kind === 'oracle') {
    if (!task.solution.some((file) => file.path === 'solution/solve.sh')) throw usageError(`${join(task.dir, 'solution/solve.sh')} is missing: --oracle runs it as the agent`);
    for (const file of task.solution) {
      files.push({ path: `${HARBOR_PATHS.solution}${file.path.slice('solution'.length)}`, content: file.content.toString('base64'), encoding: 'base64', mode: file.mode });
    }
    agentStep = { name: 'oracle', argv: [`${HARBOR_PATHS.solution}/solve.sh`], env: { ...environmentEnv, ...config.solution?.env }, ...timeout };
  } else {
    agentStep = { name: 'agent', argv: agent.argv, env: { ...environmentEnv, HARBOR_INSTRUCTION_FILE: HARBOR_PATHS.instruction }, ...timeout };
  }
  const verifierTimeout = config.verifier?.timeout_sec;
  const steps: StepSpec[] = [
    { name: 'setup', argv: ['mkdir', '-p', `${HARBOR_PATHS.logs}/agent`, `${HARBOR_PATHS.logs}/verifier`] },
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
  const spec = {
    name: `harbor: ${task.name}`.slice(0, 128),
    image,
    ...(job === undefined ? {} : { job }),
    steps: steps.map((step) => (step.env !== undefined && Object.keys(step.env).length === 0 ? { ...step, env: undefined } : step)).map(({ env: e, ...rest }) => (e === undefined ? rest : { ...rest, env: e })),
    files,
    outputs: [HARBOR_PATHS.logs],
    ...(caps === undefined ? {} : { caps }),
    network: networkOf(config),
    checks: [{ id: 'reward', kind: 'reward' as const, sources: [`artifacts["${HARBOR_PATHS.reward}"]`, `artifacts["${HARBOR_PATHS.rewardJson}"].json.reward`], weight: 1 }],
  };
  try {
    return parseRunSpec(spec);
  } catch (error) {
    throw usageError(`the RunSpec made from ${task.dir}: ${(error as Error).message}`, { path: task.dir });
  }
}
