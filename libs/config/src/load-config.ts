import { CairnError } from '@cairn/contracts';
import { z } from 'zod';

/**
 * Reads one app's configuration from the environment, once, through a zod schema whose keys are
 * the variable names. A missing or malformed variable stops the process at boot with a message
 * that names it (and never echoes its value: it may be a credential).
 */
export function loadConfig<S extends z.ZodObject>(schema: S, env: NodeJS.ProcessEnv = process.env): z.infer<S> {
  const picked: Record<string, string> = {};
  for (const key of Object.keys(schema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') picked[key] = value;
  }
  const parsed = schema.safeParse(picked);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(config)'}: ${issue.message}`);
    throw new CairnError('E_INPUT', `invalid configuration: ${problems.join('; ')}`, {
      variables: parsed.error.issues.map((issue) => issue.path.join('.')),
    });
  }
  return parsed.data;
}

export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';
export const DEFAULT_DATABASE_URL = 'postgres://cairn:cairn@127.0.0.1:5432/cairn';
export const DEFAULT_EVIDENCE_STREAM = 'CAIRN_EVIDENCE';
export const DEFAULT_EVIDENCE_SUBJECT_PREFIX = 'cairn.evidence';

const natsUrl = z
  .string()
  .regex(/^(nats|tls):\/\/[^\s]+$/, 'a nats:// or tls:// URL')
  .default(DEFAULT_NATS_URL);
const streamName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a JetStream stream name');
const subjectPrefix = z.string().regex(/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/, 'dot-separated lower-case tokens');

/** What every process that touches the evidence log reads. */
export const EvidenceLogConfigSchema = z.object({
  CAIRN_NATS_URL: natsUrl,
  CAIRN_EVIDENCE_STREAM: streamName.default(DEFAULT_EVIDENCE_STREAM),
  CAIRN_EVIDENCE_SUBJECT_PREFIX: subjectPrefix.default(DEFAULT_EVIDENCE_SUBJECT_PREFIX),
});
export type EvidenceLogConfig = z.infer<typeof EvidenceLogConfigSchema>;

/** What every process that touches the projections reads. */
export const DatabaseConfigSchema = z.object({
  CAIRN_DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\/[^\s]+$/, 'a postgres:// URL')
    .default(DEFAULT_DATABASE_URL),
});
export type DatabaseConfig = z.infer<typeof DatabaseConfigSchema>;
