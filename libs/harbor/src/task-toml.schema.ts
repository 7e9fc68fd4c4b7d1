import { CairnError, CheckIdSchema, inputIssues } from '@cairn/contracts';
import { parse as parseToml } from 'smol-toml';
import { z } from 'zod';

/*
 * task.toml, as Harbor's TaskConfig (schema 1.x) reads it, plus Cairn's `[[verifier.judge]]`
 * (docs/missions.md). Every field is either mapped or refused by name (E_INPUT): nothing is silently
 * ignored but metadata.
 */

const seconds = z.number().positive().max(86_400);
const env = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment name'), z.string().refine((v) => !v.includes('${'), 'a ${VAR} template (Cairn passes no host variables; use a secret)'));
const unsupported = (what: string) => z.unknown().refine((value) => value === undefined || value === null || (Array.isArray(value) && value.length === 0), `${what} is not supported by Cairn yet`);
const notAUser = z.unknown().refine((value) => value === undefined || value === null, 'Cairn runs every step as its sandbox user; remove user');
export const SIZE = /^([0-9]+(?:\.[0-9]+)?)\s*([KMG])$/i;

/** What a judge criterion of a task reads: a step's output, or a file the task writes under /logs. */
const JudgeSourceSchema = z.union([
  z.enum(['agent.stdout', 'agent.stderr', 'verifier.stdout', 'verifier.stderr']),
  z
    .string()
    .regex(/^\/logs\/(?:agent|verifier)\/[A-Za-z0-9._-]+(?:\/[A-Za-z0-9._-]+)*$/, 'a file under /logs/agent/ or /logs/verifier/')
    .refine((path) => !path.split('/').some((segment) => segment === '.' || segment === '..'), 'no . or .. segment'),
], { error: "agent.stdout, agent.stderr, verifier.stdout, verifier.stderr, or a file under /logs/agent/ or /logs/verifier/" });

/** `[[verifier.judge]]`: a rubric criterion the operator's model scores (ADR 0030), beside the reward. */
export const HarborJudgeSchema = z.strictObject({
  id: CheckIdSchema.refine((id) => id !== 'reward', 'reward is the task\'s reward criterion; name the judge otherwise'),
  criterion: z.string().min(1).max(2048),
  source: JudgeSourceSchema,
  weight: z.number().positive().max(1_000_000).optional(),
  scale: z.number().int().min(1).max(100).optional(),
});
export type HarborJudge = z.infer<typeof HarborJudgeSchema>;

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
      judge: z
        .array(HarborJudgeSchema)
        .max(16)
        .superRefine((judges, context) => {
          const seen = new Set<string>();
          judges.forEach((judge, index) => {
            if (seen.has(judge.id)) context.addIssue({ code: 'custom', path: [index, 'id'], message: `${judge.id} is given twice` });
            seen.add(judge.id);
          });
        })
        .optional(),
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

/** Parses and validates task.toml: a bad or unknown field is E_INPUT naming it (`environment.gpus`). */
export function parseTaskToml(text: string, where: string): HarborTaskToml {
  let document: unknown;
  try {
    document = parseToml(text);
  } catch (error) {
    throw new CairnError('E_INPUT', `${where}: not valid TOML: ${(error as Error).message.split('\n')[0] ?? ''}`, { path: where });
  }
  const result = HarborTaskTomlSchema.safeParse(document);
  if (result.success) return result.data;
  const issues = inputIssues(result.error);
  throw new CairnError('E_INPUT', `${where}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { path: where, issues });
}
