import { z } from 'zod';
import { ChainIdSchema, RunIdSchema, Sha256HexSchema, TenantIdSchema, TimestampSchema } from '../envelope.js';
import { ErrorCodeSchema, QueueWaitSchema } from '../error-codes.js';
import { MAX_RUN_RETRIES } from '../frozen-caps.constants.js';
import { WorkerIdSchema } from '../event-fields.schema.js';
import { EvidenceReceiptSchema } from '../evidence-event.schema.js';
import { RunStateSchema, VerdictSchema } from '../run-state.schema.js';
import { storableText } from '../text-rules.js';

/*
 * The REST contract's shapes (camelCase; receipts stay snake_case, exactly as stored). Handlers
 * return these types, and the OpenAPI document is generated from the same schemas.
 */

/**
 * Where a run or sandbox create waits for a worker with room (the scheduler's placement queue): its
 * place in line, how long the line is, what it waits for, since when, and (a sandbox create) until when.
 */
export const QueueSpotSchema = z.strictObject({
  position: z.number().int().min(1),
  length: z.number().int().min(1),
  waitingFor: QueueWaitSchema,
  since: TimestampSchema,
  until: TimestampSchema.nullable(),
});
export type QueueSpot = z.infer<typeof QueueSpotSchema>;

/**
 * A W3C trace id (ADR 0031): 32 lower-case hex digits, never all zeros (the invalid trace id).
 * What an operator searches their tracing backend for to see where a run waited.
 */
export const TraceIdSchema = z
  .string()
  .regex(/^[0-9a-f]{32}$/, 'a W3C trace id: 32 lower-case hex digits')
  // Not in the pattern: a look-ahead is not a regular expression every JSON Schema validator runs.
  .refine((id) => !/^0+$/.test(id), 'the all-zero trace id is the invalid one');
export type TraceId = z.infer<typeof TraceIdSchema>;

export const RunSchema = z.strictObject({
  runId: RunIdSchema,
  tenant: TenantIdSchema,
  name: z.string().nullable(),
  state: RunStateSchema,
  errorCode: ErrorCodeSchema.nullable(),
  verdict: VerdictSchema.nullable(),
  score: z.number().nullable(),
  maxScore: z.number().nullable(),
  upperBound: z.number().nullable(),
  createdAt: TimestampSchema,
  updatedAt: TimestampSchema,
  eventCount: z.number().int().min(0),
  headHash: Sha256HexSchema,
  sealed: z.boolean(),
  /** Present while the run waits in the placement queue. */
  queue: QueueSpotSchema.optional(),
  /** The trace the run was submitted in (its `run.submitted` message's `traceparent`); absent when it was submitted untraced. */
  traceId: TraceIdSchema.optional(),
});
export type Run = z.infer<typeof RunSchema>;

export const RunListSchema = z.strictObject({
  items: z.array(RunSchema),
  /** Pass as `cursor` for the next (older) page; null on the last page. */
  nextCursor: z.string().nullable(),
});
export type RunList = z.infer<typeof RunListSchema>;

/** A stored receipt: the body plus `prev_hash` and `hash`. */
export const ReceiptSchema = EvidenceReceiptSchema;
/** Receipts are served as stored; the type is the envelope every one of them has (the rest is its type's fields). */
export type Receipt = Record<string, unknown> & { seq: number; run_id: string; tenant: string; type: string; actor: string; ts: string; hash: string; prev_hash: string };

export const EventPageSchema = z.strictObject({
  items: z.array(ReceiptSchema),
  /** Pass as `after` for the next page; null when this page reached the run's last projected receipt. */
  nextAfter: z.number().int().min(0).nullable(),
});
export interface EventPage {
  items: Receipt[];
  nextAfter: number | null;
}

export const BUNDLE_FORMAT = 'cairn.bundle/v1';

export const GradeSchema = z.strictObject({
  score: z.number(),
  maxScore: z.number(),
  upperBound: z.number(),
});
export type Grade = z.infer<typeof GradeSchema>;

export const ProofBundleSchema = z.strictObject({
  format: z.literal(BUNDLE_FORMAT),
  /** The chain's id: a run's (`run_…`), a sandbox session's (`sbx_…`) or a tenant's admin chain (`adm_…`). */
  runId: ChainIdSchema,
  receipts: z.array(ReceiptSchema),
  /**
   * `/out/…` → sha256 of a collected file; `steps[i].stdout` / `steps[i].stderr` → sha256 of the step's (redacted) output.
   * A sandbox's: `execs[<exec id>].stdout|stderr` → sha256 of an exec's output; a path → sha256 of the last file written there.
   * A run retried after a lost worker (ADR 0035): an earlier attempt `n`'s outputs under `attempts[n].` (`attempts[1].steps[0].stdout`).
   */
  artifacts: z.record(z.string(), Sha256HexSchema),
  verdict: VerdictSchema.nullable(),
  grade: GradeSchema.nullable(),
  headHash: Sha256HexSchema,
});
export interface ProofBundle {
  format: typeof BUNDLE_FORMAT;
  runId: string;
  receipts: Receipt[];
  artifacts: Record<string, string>;
  verdict: z.infer<typeof VerdictSchema> | null;
  grade: Grade | null;
  headHash: string;
}

export const SubmitAcceptedSchema = z.strictObject({
  runId: RunIdSchema,
  state: z.literal('SUBMITTED'),
  /** True when this Idempotency-Key had created the run before: nothing new happened. */
  duplicate: z.boolean(),
});
export type SubmitAccepted = z.infer<typeof SubmitAcceptedSchema>;

export const CancelRequestSchema = z.strictObject({
  reason: z.string().min(1).max(1024).check(storableText('a reason')).optional(),
});
export type CancelRequest = z.infer<typeof CancelRequestSchema>;

export const CancelAcceptedSchema = z.strictObject({
  runId: RunIdSchema,
  state: RunStateSchema,
});
export type CancelAccepted = z.infer<typeof CancelAcceptedSchema>;

/** Why a worker may or may not take work now (`workerStatus` in @cairn/scheduling): the first that applies. */
export const WORKER_STATUSES = ['eligible', 'unhealthy', 'stale', 'draining', 'overloaded'] as const;
export const WorkerStatusSchema = z.enum(WORKER_STATUSES);
export type WorkerStatusName = z.infer<typeof WorkerStatusSchema>;

/** An operator's drain of a worker (ADR 0026). */
export const WorkerDrainViewSchema = z.strictObject({
  since: TimestampSchema,
  /** The actor that asked (`key:<id>`). */
  by: z.string(),
});

export const RegradeRequestSchema = z.strictObject({
  reason: z.string().min(1).max(1024).check(storableText('a reason')).optional(),
});
export type RegradeRequest = z.infer<typeof RegradeRequestSchema>;

/** `grade.requested` is on the run's chain (or was: `duplicate`); the grader grades it again and seals it (docs/adr/0030). */
export const RegradeAcceptedSchema = z.strictObject({
  runId: RunIdSchema,
  duplicate: z.boolean(),
});
export type RegradeAccepted = z.infer<typeof RegradeAcceptedSchema>;

export const WorkerSchema = z.strictObject({
  workerId: WorkerIdSchema,
  /** eligible, or why not: unhealthy, stale (silent past the stale window), draining, overloaded (full). */
  status: WorkerStatusSchema,
  /** The worker says it is healthy and its last heartbeat is fresh. */
  healthy: z.boolean(),
  /** Takes no new work: an operator's drain, or the worker shutting down. */
  draining: z.boolean(),
  /** The operator's drain, when one is set: it outlives the worker's restarts until lifted. */
  drain: WorkerDrainViewSchema.nullable(),
  slots: z.number().int().min(0),
  /** Runs and sandbox sessions the worker holds now. */
  inFlight: z.number().int().min(0),
  /** Of those, runs and sandbox sessions. */
  runs: z.number().int().min(0),
  sandboxes: z.number().int().min(0),
  capacity: z.strictObject({
    slots: z.number().int().min(0),
    memoryMiB: z.number().int().min(0),
    cpus: z.number().min(0),
    diskMiB: z.number().int().min(0),
    /** The pids caps of its sandboxes together; absent: not bounded. */
    pids: z.number().int().min(0).optional(),
    /** CPU shares admitted per CPU (sessions and runs together), and for runs alone. */
    cpuOversubscription: z.number().min(1).optional(),
    runCpuOversubscription: z.number().min(1).optional(),
  }),
  /** What its runs and sandboxes hold now (leases, and what it reports): every slot is given back when they end. */
  reserved: z.strictObject({
    slots: z.number().int().min(0),
    memoryMiB: z.number().int().min(0),
    cpus: z.number().min(0),
    diskMiB: z.number().int().min(0),
    pids: z.number().int().min(0),
  }),
  /** When the gateway last saw a new heartbeat of the worker, on the gateway's own clock (ADR 0033), not the time the worker wrote. */
  lastHeartbeatAt: TimestampSchema,
  /** `name:tag` → `sha256:…` of the images the worker has locally. */
  images: z.record(z.string(), z.string()),
});
export type Worker = z.infer<typeof WorkerSchema>;

export const WorkerListSchema = z.strictObject({ items: z.array(WorkerSchema) });
export type WorkerList = z.infer<typeof WorkerListSchema>;

export const HEALTH_SERVICES = ['intake', 'policy', 'scheduler', 'runtime', 'kernel', 'verifier', 'grader', 'projector'] as const;
export type HealthService = (typeof HEALTH_SERVICES)[number];

export const HealthSchema = z.strictObject({
  /** `ok` when NATS, PostgreSQL (with the projections) and every service answer; `degraded` otherwise. */
  status: z.enum(['ok', 'degraded']),
  checks: z.strictObject({
    nats: z.enum(['ok', 'down']),
    postgres: z.enum(['ok', 'down']),
    /** A service is `ok` while a consumer of its name is pulling from its stream. */
    services: z.record(z.enum(HEALTH_SERVICES), z.enum(['ok', 'missing'])),
  }),
});
export type Health = z.infer<typeof HealthSchema>;

/* Query and path parameters. */

/** An instant as receipts write it, and a real one (no 13th month): PostgreSQL never sees a bad one. */
const InstantSchema = TimestampSchema.refine((text) => {
  const time = Date.parse(text);
  return !Number.isNaN(time) && new Date(time).toISOString() === text;
}, 'a real instant, such as 2026-01-31T00:00:00.000Z');

export const ListRunsQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(200).optional(),
  cursor: z.string().min(1).max(512).optional(),
  state: RunStateSchema.optional(),
  /** Runs created at or after this instant (RFC 3339 UTC, as receipts write times). */
  createdAfter: InstantSchema.optional(),
  /** Runs created before this instant. */
  createdBefore: InstantSchema.optional(),
});
export type ListRunsQuery = z.infer<typeof ListRunsQuerySchema>;

/** Receipts per page of `…/events` when `limit` is absent. */
export const DEFAULT_EVENTS_PAGE = 100;

export const ListEventsQuerySchema = z.strictObject({
  after: z.coerce.number().int().min(0).max(2_147_483_647).optional(),
  limit: z.coerce.number().int().min(1).max(1000).optional(),
});
export type ListEventsQuery = z.infer<typeof ListEventsQuerySchema>;

export const StreamEventsQuerySchema = z.strictObject({
  after: z.coerce.number().int().min(0).max(2_147_483_647).optional(),
});
export type StreamEventsQuery = z.infer<typeof StreamEventsQuerySchema>;

/**
 * `…/steps/:index/:stream?attempt=n`: the output of that step in attempt `n` of a run retried after
 * a lost worker (ADR 0035), 1 the first; absent: the current attempt's.
 */
export const StepOutputQuerySchema = z.strictObject({
  attempt: z.coerce.number().int().min(1).max(1 + MAX_RUN_RETRIES).optional(),
});
export type StepOutputQuery = z.infer<typeof StepOutputQuerySchema>;

/** `Idempotency-Key`: 1–200 printable ASCII characters. */
export const IdempotencyKeySchema = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[\x20-\x7E]+$/, 'printable ASCII only');

/** `Last-Event-ID`: `<chain id>:<seq>` (a run's or a sandbox's chain), as the stream sent it. */
export const LastEventIdSchema = z.string().regex(/^((?:run|sbx|adm)_[a-z0-9][a-z0-9_-]{0,95}):(0|[1-9][0-9]{0,9})$/, 'an event id <chain id>:<seq>');
