import { CairnError, ChainIdSchema } from '@cairn/contracts';
import { z } from 'zod';

/*
 * What a driver needs to start one sandbox. Shape and sanity bounds only: whether the caps are
 * allowed (under the frozen maxima, under the worker's free capacity) is policy's and the
 * scheduler's decision, made before a driver is asked.
 */

/** Minimums below which a sandbox cannot even hold its init, its PID 1 and one step. */
export const MIN_CAPS = Object.freeze({ memoryMiB: 8, pids: 4, diskMiB: 4 });

export const SandboxCapsSchema = z.strictObject({
  /** Wall time of one step (exec); a step's own timeout may be lower, never higher. */
  wallSeconds: z.number().int().positive().max(86_400),
  /** Memory for processes; the tmpfs pages of `diskMiB` come on top (see `memoryLimitMiB`). */
  memoryMiB: z.number().int().min(MIN_CAPS.memoryMiB).max(1_048_576),
  pids: z.number().int().min(MIN_CAPS.pids).max(4_194_304),
  /** Everything writable: `/tmp`, `/work`, `/out` and `/dev/shm` together (see `tmpfsLayout`). */
  diskMiB: z.number().int().min(MIN_CAPS.diskMiB).max(16_777_216),
  cpus: z.number().positive().max(1024),
});
export type SandboxCaps = z.infer<typeof SandboxCapsSchema>;

/** A worker id is a label value and part of log lines: a plain token. */
export const WorkerIdSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'a worker id is [A-Za-z0-9_.-], at most 128 characters');
export const PoolNameSchema = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'a pool name is [a-z0-9_-], at most 64 characters');

export const SandboxLabelsSchema = z.strictObject({
  workerId: WorkerIdSchema,
  /** The chain the sandbox serves: a run (`run_…`) or a sandbox session (`sbx_…`). */
  chainId: ChainIdSchema,
  pool: PoolNameSchema.optional(),
});
export type SandboxLabels = z.infer<typeof SandboxLabelsSchema>;

export const SandboxSpecSchema = z.strictObject({
  /** A local image reference (tag or `sha256:…` id); drivers never pull. */
  image: z
    .string()
    .min(1)
    .max(255)
    .regex(/^[A-Za-z0-9][A-Za-z0-9_.:/@-]*$/, 'an image reference such as cairn/sandbox-busybox:1 or sha256:…'),
  caps: SandboxCapsSchema,
  labels: SandboxLabelsSchema,
  /** The `<n>` of `cairn-<chain id>-<n>`: a chain that needs a second sandbox asks for 2. */
  instance: z.number().int().min(1).max(9999).default(1),
  /** PID 1 sleeps this long and then the sandbox stops by itself, even if its owner is gone. */
  lifetimeSeconds: z.number().int().positive().max(31_536_000).default(86_400),
});
export type SandboxSpec = z.output<typeof SandboxSpecSchema>;
export type SandboxSpecInput = z.input<typeof SandboxSpecSchema>;

/** Validates a spec; a bad one is `E_INPUT` naming every problem, and no sandbox is touched. */
export function parseSandboxSpec(input: unknown): SandboxSpec {
  const parsed = SandboxSpecSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(spec)'}: ${issue.message}`);
  throw new CairnError('E_INPUT', `invalid sandbox spec: ${issues.join('; ')}`, { issues });
}
