import { ArtifactReadConfigSchema, EvidenceLogConfigSchema, SecretValuesConfigSchema, TlogConfigSchema } from '@cairn/config';
import { JUDGE_MAX_INPUT_BYTES } from '@cairn/contracts';
import { z } from 'zod';

/** The grader's whole configuration, read once from the environment at boot. */
export const GraderConfigSchema = EvidenceLogConfigSchema.extend({
  ...ArtifactReadConfigSchema.shape,
  ...SecretValuesConfigSchema.shape,
  ...TlogConfigSchema.shape,
  /**
   * How long a run that ended with its sandbox not yet torn down on the record (a cancel or a
   * lost lease mid-run) waits for the runtime's `sandbox.destroyed` before it is sealed anyway.
   */
  CAIRN_GRADER_TEARDOWN_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
  /**
   * The deployment's seal signing key (`cairn up` makes it, mode 0600): a path, never the key.
   * Absent, seals are appended unsigned (and `cairn verify --key` refuses them).
   */
  CAIRN_SEAL_KEY_FILE: z.string().min(1).optional(),
  /** How often a checkpoint of the log of seal heads is signed, when the tree grew since the last (and whenever a reader asks). */
  CAIRN_TLOG_CHECKPOINT_INTERVAL_MS: z.coerce.number().int().min(100).max(3_600_000).default(10_000),
  /** Unacked for this long, a receipt is delivered again (after a crash). */
  CAIRN_GRADER_ACK_WAIT_MS: z.coerce.number().int().min(1000).max(600_000).default(30_000),
  /**
   * The judge you bring (docs/adr/0030): the base URL of an OpenAI-compatible API (`…/v1`; the
   * grader posts to `<url>/chat/completions`). Absent: a rubric's `judge` criteria fail their grade
   * with `grade.failed` cause `unconfigured` (re-gradeable once it is set).
   */
  CAIRN_JUDGE_URL: z
    .url({ protocol: /^https?$/, error: 'CAIRN_JUDGE_URL is an http(s) URL' })
    .refine((u) => new URL(u).username === '' && new URL(u).password === '', 'CAIRN_JUDGE_URL carries no credentials: put the key in CAIRN_JUDGE_API_KEY_FILE')
    .optional(),
  /** The model the judge is asked for (required with CAIRN_JUDGE_URL). */
  CAIRN_JUDGE_MODEL: z.string().min(1).max(256).optional(),
  /** A file holding the judge's API key (sent as a bearer token), mode 0600: a path, never the key. Absent: no Authorization header. */
  CAIRN_JUDGE_API_KEY_FILE: z.string().min(1).optional(),
  /** Never read: a key in the environment is refused at boot (it belongs in CAIRN_JUDGE_API_KEY_FILE). */
  CAIRN_JUDGE_API_KEY: z.undefined({ error: 'the judge API key is never taken from the environment: put it in a file named by CAIRN_JUDGE_API_KEY_FILE' }).optional(),
  /** How long one judgement may take before it fails (`timeout`). */
  CAIRN_JUDGE_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(60_000),
  /** The token budget of one judgement: sent as `max_tokens`, and checked against the usage the server reports. */
  CAIRN_JUDGE_MAX_TOKENS: z.coerce.number().int().min(16).max(16_384).default(512),
  /** The most bytes of a workload's text one judgement reads; a longer text fails the judgement (`budget_exceeded`), never cut. */
  CAIRN_JUDGE_MAX_INPUT_BYTES: z.coerce.number().int().min(256).max(JUDGE_MAX_INPUT_BYTES).default(16_384),
}).superRefine((config, ctx) => {
  if (config.CAIRN_JUDGE_URL !== undefined && config.CAIRN_JUDGE_MODEL === undefined) {
    ctx.addIssue({ code: 'custom', path: ['CAIRN_JUDGE_MODEL'], message: 'CAIRN_JUDGE_URL needs CAIRN_JUDGE_MODEL' });
  }
  if (config.CAIRN_JUDGE_URL === undefined && (config.CAIRN_JUDGE_MODEL !== undefined || config.CAIRN_JUDGE_API_KEY_FILE !== undefined)) {
    ctx.addIssue({ code: 'custom', path: ['CAIRN_JUDGE_URL'], message: 'CAIRN_JUDGE_MODEL and CAIRN_JUDGE_API_KEY_FILE need CAIRN_JUDGE_URL' });
  }
});
export type GraderConfig = z.infer<typeof GraderConfigSchema>;
