import { ErrorBodySchema, RunIdSchema, RunSpecSchema } from '@cairn/contracts';
import type { ErrorCode } from '@cairn/contracts';
import type { z } from 'zod';
import type { ApiKeyScope } from '../auth/api-key.codec.js';
import {
  CancelAcceptedSchema,
  CancelRequestSchema,
  EventPageSchema,
  HealthSchema,
  IdempotencyKeySchema,
  LastEventIdSchema,
  ListEventsQuerySchema,
  ListRunsQuerySchema,
  ProofBundleSchema,
  ReceiptSchema,
  RunListSchema,
  RunSchema,
  StreamEventsQuerySchema,
  SubmitAcceptedSchema,
  WorkerListSchema,
} from './api.schemas.js';

/** Every schema the API document names, by its component name. */
export const API_COMPONENTS = {
  RunSpec: RunSpecSchema,
  Run: RunSchema,
  RunList: RunListSchema,
  Receipt: ReceiptSchema,
  EventPage: EventPageSchema,
  ProofBundle: ProofBundleSchema,
  SubmitAccepted: SubmitAcceptedSchema,
  CancelRequest: CancelRequestSchema,
  CancelAccepted: CancelAcceptedSchema,
  WorkerList: WorkerListSchema,
  Health: HealthSchema,
  Error: ErrorBodySchema,
} as const satisfies Record<string, z.ZodType>;
export type ApiComponent = keyof typeof API_COMPONENTS;

export interface ApiRoute {
  operationId: string;
  method: 'GET' | 'POST';
  /** Fastify style (`/v1/runs/:id`); the OpenAPI document writes `{id}`. */
  path: string;
  summary: string;
  /** The scope a key needs; null for a public route (no key). */
  scope: ApiKeyScope | null;
  status: number;
  /** A component; `sse` for a text/event-stream of receipts; `openapi` for this API's own document. */
  response: ApiComponent | 'sse' | 'openapi';
  requestBody?: { component: ApiComponent; required: boolean };
  pathParams?: Readonly<Record<string, z.ZodType>>;
  query?: z.ZodObject;
  headers?: Readonly<Record<string, { schema: z.ZodType; required: boolean; description: string }>>;
  responseHeaders?: Readonly<Record<string, string>>;
  /** The codes this route answers besides its success (auth codes are added for keyed routes). */
  errors: readonly ErrorCode[];
}

const RUN_ID = { id: RunIdSchema } as const;

/**
 * The route table: the controllers take method, path, status and scope from it (`@ApiRoute`),
 * and `buildOpenApi()` renders it, so the document cannot drift from what is served.
 */
export const API_ROUTES = {
  submitRun: {
    operationId: 'submitRun',
    method: 'POST',
    path: '/v1/runs',
    summary: 'Submit a run. The spec is validated here (nothing is published when it is invalid); intake creates the run.',
    scope: 'runs:write',
    status: 202,
    response: 'SubmitAccepted',
    requestBody: { component: 'RunSpec', required: true },
    headers: {
      'Idempotency-Key': { schema: IdempotencyKeySchema, required: true, description: 'The same key with the same body answers the same run; with another body 422.' },
    },
    responseHeaders: { Location: '/v1/runs/<run id>' },
    errors: ['E_INPUT', 'E_TOO_LARGE', 'E_IDEMPOTENCY_MISMATCH', 'E_UNAVAILABLE'],
  },
  listRuns: {
    operationId: 'listRuns',
    method: 'GET',
    path: '/v1/runs',
    summary: "The tenant's runs, newest first, a page at a time.",
    scope: 'runs:read',
    status: 200,
    response: 'RunList',
    query: ListRunsQuerySchema,
    errors: ['E_INPUT', 'E_UNAVAILABLE'],
  },
  getRun: {
    operationId: 'getRun',
    method: 'GET',
    path: '/v1/runs/:id',
    summary: 'A run as projected from its chain.',
    scope: 'runs:read',
    status: 200,
    response: 'Run',
    pathParams: RUN_ID,
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_UNAVAILABLE'],
  },
  listEvents: {
    operationId: 'listEvents',
    method: 'GET',
    path: '/v1/runs/:id/events',
    summary: "A run's receipts in chain order, exactly as stored, after a seq.",
    scope: 'runs:read',
    status: 200,
    response: 'EventPage',
    pathParams: RUN_ID,
    query: ListEventsQuerySchema,
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_UNAVAILABLE'],
  },
  streamEvents: {
    operationId: 'streamEvents',
    method: 'GET',
    path: '/v1/runs/:id/events/stream',
    summary:
      "A run's receipts as Server-Sent Events (`id: <run id>:<seq>`, `event: receipt`, `data: <receipt>`), resuming after Last-Event-ID or `after`; a comment heartbeat every 15 s; closed after run.sealed.",
    scope: 'runs:read',
    status: 200,
    response: 'sse',
    pathParams: RUN_ID,
    query: StreamEventsQuerySchema,
    headers: {
      'Last-Event-ID': { schema: LastEventIdSchema, required: false, description: 'Resume after this event (wins over `after`).' },
    },
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_RATE_LIMITED', 'E_UNAVAILABLE'],
  },
  getBundle: {
    operationId: 'getBundle',
    method: 'GET',
    path: '/v1/runs/:id/bundle',
    summary: "The run's proof bundle (cairn.bundle/v1): receipts, artifact hashes, verdict and grade; verifiable offline.",
    scope: 'runs:read',
    status: 200,
    response: 'ProofBundle',
    pathParams: RUN_ID,
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_UNAVAILABLE'],
  },
  cancelRun: {
    operationId: 'cancelRun',
    method: 'POST',
    path: '/v1/runs/:id/cancel',
    summary: 'Cancel a run that has not ended. A sealed run is 409 E_SEALED; one that ended otherwise 409 E_CONFLICT.',
    scope: 'runs:write',
    status: 202,
    response: 'CancelAccepted',
    pathParams: RUN_ID,
    requestBody: { component: 'CancelRequest', required: false },
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_SEALED', 'E_CONFLICT', 'E_UNAVAILABLE'],
  },
  listWorkers: {
    operationId: 'listWorkers',
    method: 'GET',
    path: '/v1/workers',
    summary: 'The runtime workers registered now, with capacity and heartbeat.',
    scope: 'admin',
    status: 200,
    response: 'WorkerList',
    errors: ['E_UNAVAILABLE'],
  },
  health: {
    operationId: 'health',
    method: 'GET',
    path: '/v1/health',
    summary: 'NATS, PostgreSQL and the services: ok or degraded (always 200).',
    scope: null,
    status: 200,
    response: 'Health',
    errors: [],
  },
  openApi: {
    operationId: 'openApi',
    method: 'GET',
    path: '/openapi.json',
    summary: 'This document.',
    scope: null,
    status: 200,
    response: 'openapi',
    errors: [],
  },
} as const satisfies Record<string, ApiRoute>;
export type ApiRouteName = keyof typeof API_ROUTES;
