import { z } from 'zod';
import { ChainLinkSchema, EnvelopeSchema, WorkChainIdSchema } from './envelope.js';
import { storableText } from './text-rules.js';

/*
 * Building blocks of receipt bodies (snake_case). No defaults and no transforms anywhere in a receipt
 * schema: what is parsed is exactly what was hashed, and it survives a JSON round trip unchanged.
 */

const { type: _type, ...ENVELOPE_FIELDS } = EnvelopeSchema.shape;
/** Run and sandbox receipts live on run and sandbox chains only; `admin.*` ones override this with the admin chain. */
const WORK_ENVELOPE_FIELDS = { ...ENVELOPE_FIELDS, run_id: WorkChainIdSchema };

/** A strict receipt body: the envelope fields, a `type` literal, and the type's own fields. */
export function eventBodySchema<T extends string, S extends z.ZodRawShape>(type: T, fields: S) {
  return z.strictObject({ ...WORK_ENVELOPE_FIELDS, type: z.literal(type), ...fields });
}

/** The stored receipt of a body schema: the body plus `prev_hash` and `hash`. */
export function receiptSchemaOf<S extends z.ZodRawShape>(body: z.ZodObject<S, z.core.$strict>) {
  return body.extend(ChainLinkSchema.shape);
}

/** Free text on the chain: bounded, and nothing PostgreSQL or canonical JSON cannot hold (no NUL). */
export function textSchema(max: number) {
  return z.string().max(max).check(storableText('text'));
}

/** A JSON value on the chain: as `z.json()`, but no string and no member name holds a NUL. */
export type StorableJson = string | number | boolean | null | StorableJson[] | { [key: string]: StorableJson };
export const StorableJsonSchema: z.ZodType<StorableJson> = z.lazy(() =>
  z.union([
    z.string().check(storableText('text')),
    z.number(),
    z.boolean(),
    z.null(),
    z.array(StorableJsonSchema),
    z.record(z.string().check(storableText('a member name')), StorableJsonSchema),
  ]),
);

export const TokenSchema = z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/, 'a token is [a-z0-9_.-], at most 64 characters');
export const WorkerIdSchema = TokenSchema;
export const LeaseIdSchema = TokenSchema;
export const ApprovalIdSchema = TokenSchema;
export const ExecIdSchema = TokenSchema;
/** Docker's container-name grammar. */
export const ContainerNameSchema = z.string().regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/, 'a container name');

export const StepIndexSchema = z.number().int().min(0).max(63);
export const DurationMsSchema = z.number().int().min(0);
export const ByteCountSchema = z.number().int().min(0);
/** A process exit status; null when the process was killed by a signal and never exited. */
export const ExitCodeSchema = z.number().int().min(0).max(255).nullable();
export const SignalSchema = z.string().regex(/^SIG[A-Z0-9]{1,12}$/, 'a signal name such as SIGKILL').nullable();

/** A path inside a sandbox, as receipts record it (the RunSpec checks the roots; this only the shape). */
export const SandboxPathSchema = z.string().max(1024).regex(/^\/\P{Cc}*$/u, 'an absolute path without control characters');
/** Collected file → sha256 of its bytes. */
export const ArtifactHashesSchema = z.record(SandboxPathSchema, z.string().regex(/^[0-9a-f]{64}$/, 'a lower-case hex sha256'));

export const LIMIT_KINDS = ['wall_time', 'memory', 'pids', 'disk', 'output_bytes'] as const;
export const LimitKindSchema = z.enum(LIMIT_KINDS);
export type LimitKind = z.infer<typeof LimitKindSchema>;

/** What redaction removed: where, which pattern, how often. Never the value (I-7). */
export const RedactionSchema = z.strictObject({
  stream: z.enum(['stdout', 'stderr', 'file']),
  path: SandboxPathSchema.optional(),
  pattern: TokenSchema,
  /** The name of the run's secret that was seen (names only, I-7); absent for a key pattern. */
  secret: z.string().regex(/^[A-Z_][A-Z0-9_]{0,63}$/, 'a secret name').optional(),
  count: z.number().int().min(1),
});
export type Redaction = z.infer<typeof RedactionSchema>;

/** The caps a run actually got, after policy (snake_case, all resolved). */
export const GrantedCapsSchema = z.strictObject({
  wall_seconds: z.number().int().positive(),
  memory_mib: z.number().int().positive(),
  pids: z.number().int().positive(),
  disk_mib: z.number().int().positive(),
  cpus: z.number().positive(),
});
export type GrantedCaps = z.infer<typeof GrantedCapsSchema>;

/** The outcome of one process run inside a sandbox: shared by `step.completed` and `sandbox.exec.completed`. */
export const PROCESS_RESULT_FIELDS = {
  exit_code: ExitCodeSchema,
  signal: SignalSchema,
  stdout_sha256: z.string().regex(/^[0-9a-f]{64}$/, 'a lower-case hex sha256'),
  stderr_sha256: z.string().regex(/^[0-9a-f]{64}$/, 'a lower-case hex sha256'),
  stdout_bytes: ByteCountSchema,
  stderr_bytes: ByteCountSchema,
  output_truncated: z.boolean(),
  duration_ms: DurationMsSchema,
  limits_hit: z.array(LimitKindSchema).max(LIMIT_KINDS.length),
  redactions: z.array(RedactionSchema).max(256),
};

/** A Linux capability as the engine names it (`ALL`, `CHOWN`, `NET_RAW`, …). */
const CapabilityNameSchema = z.string().regex(/^[A-Z][A-Z0-9_]{0,63}$/, 'a capability name such as ALL or NET_RAW');

/** One writable tmpfs mount of a sandbox. */
export const TmpfsMountSchema = z.strictObject({
  size_bytes: ByteCountSchema,
  /** Programs may run from it (`/work`, `/out`); `/tmp` and `/dev/shm` are `noexec`. */
  exec: z.boolean(),
});

/**
 * The isolation a sandbox runs under, as the container engine reports it after creating it
 * (docs/sandbox-hardening.md): what `sandbox.created` claims was in force for every step.
 */
export const SandboxHardeningSchema = z.strictObject({
  read_only_root: z.boolean(),
  cap_drop: z.array(CapabilityNameSchema).max(64),
  cap_add: z.array(CapabilityNameSchema).max(64),
  no_new_privileges: z.boolean(),
  /** `uid:gid` the sandbox's processes run as. */
  user: z.string().regex(/^[0-9]{1,10}:[0-9]{1,10}$/, 'uid:gid'),
  /** An init is PID 1 (it reaps children and forwards signals). */
  init: z.boolean(),
  pids_limit: z.number().int().positive(),
  /** The memory cgroup limit: the processes' memory plus the tmpfs pages charged to it. */
  memory_bytes: z.number().int().positive(),
  /** The engine's network mode (`none`: no interface but loopback). */
  network: z.string().regex(/^[a-z0-9][a-z0-9_.:-]{0,127}$/, 'an engine network mode such as none'),
  /** Every writable path: tmpfs, size-capped. */
  tmpfs: z.record(SandboxPathSchema, TmpfsMountSchema),
  /** `default`: the engine's default profile; `custom`: a profile of our own; `unconfined`: none at all. */
  seccomp: z.enum(['default', 'custom', 'unconfined']),
  /**
   * sha256 of the custom profile the engine was given (the JSON after `seccomp=`), so a chain names
   * exactly which one. Optional, like `userns_remap`, only so receipts written before it still read.
   */
  seccomp_profile_sha256: z.string().regex(/^[0-9a-f]{64}$/, 'a lower-case hex sha256').optional(),
  /** The engine remaps user namespaces (`userns-remap`): uid 0 inside is an unprivileged uid outside. */
  userns_remap: z.boolean().optional(),
});
export type SandboxHardening = z.infer<typeof SandboxHardeningSchema>;
