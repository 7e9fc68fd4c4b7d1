import { z } from 'zod';
import { RunIdSchema, SandboxIdSchema, Sha256HexSchema } from '../envelope.js';
import { ExecIdSchema, SandboxPathSchema, StepIndexSchema } from '../event-fields.schema.js';
import { StepNameSchema } from '../run-spec.schema.js';

/*
 * What a run printed and wrote, read back (GET /v1/runs/:id/steps/:index/:stream, /artifacts, and
 * an exec's output of a sandbox): the bytes the artifact store holds under the sha256 the chain
 * records, served only once they hash to it. The bytes themselves are raw (`X-Cairn-Sha256` names
 * their hash); these are the JSON shapes around them.
 */

/** A process's two output streams. */
export const OUTPUT_STREAMS = ['stdout', 'stderr'] as const;
export const OutputStreamSchema = z.enum(OUTPUT_STREAMS);
export type OutputStream = z.infer<typeof OutputStreamSchema>;

/** A step's index as a path segment (`…/steps/0/stdout`). */
export const StepIndexParamSchema = z
  .string()
  .regex(/^(0|[1-9][0-9]?)$/, 'a step index: 0, 1, 2, …')
  .transform(Number)
  .pipe(StepIndexSchema);

/**
 * An artifact's path after `/artifacts/`: the recorded path without its leading `/`
 * (`out/report.json`; each segment percent-encoded, `%2F` taken as `/` too).
 */
export const ArtifactPathParamSchema = z
  .string()
  .min(1)
  .max(1024)
  .transform((path) => (path.startsWith('/') ? path : `/${path}`))
  .pipe(SandboxPathSchema);

/** One recorded output stream: its hash on the chain and what the artifact store holds of it. */
export const RecordedStreamSchema = z.strictObject({
  sha256: Sha256HexSchema,
  /** The bytes kept (redacted, bounded) as stored; null when the artifact store does not hold them. */
  bytes: z.number().int().min(0).nullable(),
  /** What the program wrote in all (more than was kept when `truncated`). */
  writtenBytes: z.number().int().min(0),
  truncated: z.boolean(),
});
export type RecordedStream = z.infer<typeof RecordedStreamSchema>;

export const StepOutputsSchema = z.strictObject({
  index: StepIndexSchema,
  /** The RunSpec's name for the step, if it gave one. */
  name: StepNameSchema.nullable(),
  exitCode: z.number().int().nullable(),
  stdout: RecordedStreamSchema,
  stderr: RecordedStreamSchema,
});
export type StepOutputs = z.infer<typeof StepOutputsSchema>;

/** A collected file (`/out/…`, or another output path of the RunSpec). */
export const ArtifactSchema = z.strictObject({
  path: SandboxPathSchema,
  sha256: Sha256HexSchema,
  /** Its size as stored; null when the artifact store does not hold it (reading it is then 404). */
  bytes: z.number().int().min(0).nullable(),
});
export type Artifact = z.infer<typeof ArtifactSchema>;

/** `GET /v1/runs/:id/artifacts`: every output of a run the chain records, steps by index, files by path. */
export const RunArtifactsSchema = z.strictObject({
  runId: RunIdSchema,
  steps: z.array(StepOutputsSchema),
  items: z.array(ArtifactSchema),
});
export type RunArtifacts = z.infer<typeof RunArtifactsSchema>;

/** An exec of a sandbox, named in the path (`…/execs/<exec id>/stdout`). */
export const ExecIdParamSchema = ExecIdSchema;

/** Path parameters of an output read, for the route table. */
export const OUTPUT_PARAMS = {
  run: { id: RunIdSchema, index: StepIndexParamSchema, stream: OutputStreamSchema },
  artifact: { id: RunIdSchema, path: ArtifactPathParamSchema },
  exec: { id: SandboxIdSchema, execId: ExecIdParamSchema, stream: OutputStreamSchema },
} as const;

/** The raw bytes of an output (a step's stream, a file): described for the API document only. */
export const OutputBytesSchema = z.string().meta({ format: 'binary' });
