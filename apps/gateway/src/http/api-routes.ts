import { ErrorBodySchema, RunIdSchema, RunSpecSchema, SandboxIdSchema, SandboxSpecSchema, SecretNameSchema } from '@cairn/contracts';
import type { ErrorCode } from '@cairn/contracts';
import type { z } from 'zod';
import type { ApiKeyScope } from '../auth/api-key.codec.js';
import { PolicyInForceSchema } from '../policy/policy.schemas.js';
import { ApprovalAcceptedSchema, ApprovalRequestSchema } from '../runs/approvals.schemas.js';
import {
  ExecRequestSchema,
  ExecResultSchema,
  ExecStreamLineSchema,
  FileBytesSchema,
  FileWrittenSchema,
  GetFileQuerySchema,
  ListSandboxesQuerySchema,
  PutFileQuerySchema,
  SandboxListSchema,
  SandboxSchema,
} from '../sandboxes/sandboxes.schemas.js';
import { SecretDeletedSchema, SecretListSchema, SecretStoredSchema, SecretValueSchema } from '../secrets/secrets.schemas.js';
import {
  DeliveryIdSchema,
  DeliveryListSchema,
  DeliverySchema,
  ListDeliveriesQuerySchema,
  WebhookCreatedSchema,
  WebhookCreateSchema,
  WebhookDeletedSchema,
  WebhookIdSchema,
  WebhookListSchema,
} from '../webhooks/webhooks.schemas.js';
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
  ApprovalRequest: ApprovalRequestSchema,
  ApprovalAccepted: ApprovalAcceptedSchema,
  WorkerList: WorkerListSchema,
  PolicyInForce: PolicyInForceSchema,
  SecretValue: SecretValueSchema,
  SecretStored: SecretStoredSchema,
  SecretList: SecretListSchema,
  SecretDeleted: SecretDeletedSchema,
  WebhookCreate: WebhookCreateSchema,
  WebhookCreated: WebhookCreatedSchema,
  WebhookList: WebhookListSchema,
  WebhookDeleted: WebhookDeletedSchema,
  Delivery: DeliverySchema,
  DeliveryList: DeliveryListSchema,
  SandboxSpec: SandboxSpecSchema,
  Sandbox: SandboxSchema,
  SandboxList: SandboxListSchema,
  ExecRequest: ExecRequestSchema,
  ExecResult: ExecResultSchema,
  ExecStreamLine: ExecStreamLineSchema,
  FileBytes: FileBytesSchema,
  FileWritten: FileWrittenSchema,
  Health: HealthSchema,
  Error: ErrorBodySchema,
} as const satisfies Record<string, z.ZodType>;
export type ApiComponent = keyof typeof API_COMPONENTS;

export interface ApiRoute {
  operationId: string;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Fastify style (`/v1/runs/:id`); the OpenAPI document writes `{id}`. */
  path: string;
  summary: string;
  /** The scope a key needs; null for a public route (no key). */
  scope: ApiKeyScope | null;
  status: number;
  /** A component; `sse` for a text/event-stream of receipts; `openapi` for this API's own document; `bytes` for raw octets. */
  response: ApiComponent | 'sse' | 'openapi' | 'bytes';
  /** Also answered, with `Accept: application/x-ndjson`, as a stream of these objects, one per line. */
  ndjson?: ApiComponent;
  /** JSON unless `contentType` says otherwise (a secret's value is `text/plain`, a sandbox file's bytes `application/octet-stream`). */
  requestBody?: { component: ApiComponent; required: boolean; contentType?: 'application/json' | 'text/plain' | 'application/octet-stream' };
  pathParams?: Readonly<Record<string, z.ZodType>>;
  query?: z.ZodObject;
  headers?: Readonly<Record<string, { schema: z.ZodType; required: boolean; description: string }>>;
  responseHeaders?: Readonly<Record<string, string>>;
  /** The codes this route answers besides its success (auth codes are added for keyed routes). */
  errors: readonly ErrorCode[];
}

const RUN_ID = { id: RunIdSchema } as const;
const SANDBOX_ID = { id: SandboxIdSchema } as const;
const SECRET_NAME = { name: SecretNameSchema } as const;
const WEBHOOK_ID = { id: WebhookIdSchema } as const;

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
    summary: "The tenant's runs, newest first, a page at a time; filtered by state and by a window on their creation time (`createdAfter` inclusive, `createdBefore` exclusive).",
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
  decideApproval: {
    operationId: 'decideApproval',
    method: 'POST',
    path: '/v1/runs/:id/approvals',
    summary:
      'Approve or reject what a held run awaits (every pending approval, or `approvalId`). The approver is recorded on the chain; a rejection ends the run CANCELLED with E_NO_APPROVAL. The key that submitted the run is 403 E_FORBIDDEN; a run awaiting nothing 409 E_CONFLICT; a sealed run 409 E_SEALED.',
    scope: 'approve',
    status: 202,
    response: 'ApprovalAccepted',
    pathParams: RUN_ID,
    requestBody: { component: 'ApprovalRequest', required: true },
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_SEALED', 'E_CONFLICT', 'E_UNAVAILABLE'],
  },
  putSecret: {
    operationId: 'putSecret',
    method: 'PUT',
    path: '/v1/secrets/:name',
    summary:
      "Store a secret of the key's tenant (replacing an earlier value of that name). The body is the value, as text/plain; it is sealed (AES-256-GCM) and never returned — a run that lists the name under `secrets` reads it from /run/secrets/<name>.",
    scope: 'secrets:write',
    status: 200,
    response: 'SecretStored',
    pathParams: SECRET_NAME,
    requestBody: { component: 'SecretValue', required: true, contentType: 'text/plain' },
    errors: ['E_INPUT', 'E_TOO_LARGE', 'E_UNAVAILABLE'],
  },
  listSecrets: {
    operationId: 'listSecrets',
    method: 'GET',
    path: '/v1/secrets',
    summary: "The tenant's secrets: names, the last four characters of each value, the key that sealed it. Never a value.",
    scope: 'secrets:write',
    status: 200,
    response: 'SecretList',
    errors: ['E_UNAVAILABLE'],
  },
  deleteSecret: {
    operationId: 'deleteSecret',
    method: 'DELETE',
    path: '/v1/secrets/:name',
    summary: "Remove a secret of the key's tenant. Runs already placed that name it fail before they start.",
    scope: 'secrets:write',
    status: 200,
    response: 'SecretDeleted',
    pathParams: SECRET_NAME,
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_UNAVAILABLE'],
  },
  createWebhook: {
    operationId: 'createWebhook',
    method: 'POST',
    path: '/v1/webhooks',
    summary:
      "Register a webhook of the key's tenant: every receipt whose type matches `events` is POSTed to `url`, signed (`Cairn-Signature: t=<unix s>,v1=<hex HMAC-SHA256(secret, t + \".\" + body)>`), retried with backoff, dead-lettered after the last attempt. The signing secret is in this response only. A URL whose host resolves to a loopback, private, link-local or metadata address is 400 E_INPUT, before any connection (unless the operator allows private ones).",
    scope: 'admin',
    status: 201,
    response: 'WebhookCreated',
    requestBody: { component: 'WebhookCreate', required: true },
    errors: ['E_INPUT', 'E_TOO_LARGE', 'E_UNAVAILABLE'],
  },
  listWebhooks: {
    operationId: 'listWebhooks',
    method: 'GET',
    path: '/v1/webhooks',
    summary: "The tenant's webhooks. Never a signing secret.",
    scope: 'admin',
    status: 200,
    response: 'WebhookList',
    errors: ['E_UNAVAILABLE'],
  },
  deleteWebhook: {
    operationId: 'deleteWebhook',
    method: 'DELETE',
    path: '/v1/webhooks/:id',
    summary: 'Remove a webhook of the tenant with its delivery log; deliveries not yet sent are dropped.',
    scope: 'admin',
    status: 200,
    response: 'WebhookDeleted',
    pathParams: WEBHOOK_ID,
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_UNAVAILABLE'],
  },
  listWebhookDeliveries: {
    operationId: 'listWebhookDeliveries',
    method: 'GET',
    path: '/v1/webhooks/:id/deliveries',
    summary: "A webhook's delivery log, newest first: status (pending, delivered, dead), attempts and each attempt's outcome.",
    scope: 'admin',
    status: 200,
    response: 'DeliveryList',
    pathParams: WEBHOOK_ID,
    query: ListDeliveriesQuerySchema,
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_UNAVAILABLE'],
  },
  replayWebhookDelivery: {
    operationId: 'replayWebhookDelivery',
    method: 'POST',
    path: '/v1/webhooks/:id/deliveries/:deliveryId/replay',
    summary: 'Send a delivery again (any status) as a new delivery with the same event id and body, signed afresh; answers the new delivery.',
    scope: 'admin',
    status: 202,
    response: 'Delivery',
    pathParams: { ...WEBHOOK_ID, deliveryId: DeliveryIdSchema },
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_UNAVAILABLE'],
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
  getPolicy: {
    operationId: 'getPolicy',
    method: 'GET',
    path: '/v1/policy',
    summary:
      "The policy document in force (CAIRN_POLICY_FILE, or the built-in default) with its version (sha256 of its canonical JSON, as `policy.decided` receipts name it), and the version the newest decision on one of the tenant's runs named.",
    scope: 'runs:read',
    status: 200,
    response: 'PolicyInForce',
    errors: ['E_UNAVAILABLE'],
  },
  createSandbox: {
    operationId: 'createSandbox',
    method: 'POST',
    path: '/v1/sandboxes',
    summary:
      'Start an interactive sandbox session: the spec goes through policy, the scheduler and a runtime like a run, and the answer waits (at most 60 s) until the sandbox is READY. Every operation on it is a receipt on its own chain (`sbx_…`). An empty body asks for the defaults.',
    scope: 'runs:write',
    status: 201,
    response: 'Sandbox',
    requestBody: { component: 'SandboxSpec', required: false },
    headers: {
      'Idempotency-Key': { schema: IdempotencyKeySchema, required: false, description: 'The same key with the same body answers the same sandbox; with another body 422.' },
    },
    responseHeaders: { Location: '/v1/sandboxes/<sandbox id>' },
    errors: ['E_INPUT', 'E_TOO_LARGE', 'E_IDEMPOTENCY_MISMATCH', 'E_POLICY_DENIED', 'E_BUDGET', 'E_SANDBOX_START', 'E_RUNTIME_ABSENT', 'E_TIMEOUT', 'E_UNAVAILABLE'],
  },
  listSandboxes: {
    operationId: 'listSandboxes',
    method: 'GET',
    path: '/v1/sandboxes',
    summary: "The tenant's sandboxes, newest first, a page at a time, as projected from their chains.",
    scope: 'runs:read',
    status: 200,
    response: 'SandboxList',
    query: ListSandboxesQuerySchema,
    errors: ['E_INPUT', 'E_UNAVAILABLE'],
  },
  getSandbox: {
    operationId: 'getSandbox',
    method: 'GET',
    path: '/v1/sandboxes/:id',
    summary: 'A sandbox as projected from its chain.',
    scope: 'runs:read',
    status: 200,
    response: 'Sandbox',
    pathParams: SANDBOX_ID,
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_UNAVAILABLE'],
  },
  deleteSandbox: {
    operationId: 'deleteSandbox',
    method: 'DELETE',
    path: '/v1/sandboxes/:id',
    summary:
      'Destroy a sandbox (its chain is then sealed); answers its view, DESTROYED. A sandbox that has already ended answers its view as it is; one not yet placed on a worker is 409 E_CONFLICT.',
    scope: 'runs:write',
    status: 200,
    response: 'Sandbox',
    pathParams: SANDBOX_ID,
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_CONFLICT', 'E_UNAVAILABLE'],
  },
  execSandbox: {
    operationId: 'execSandbox',
    method: 'POST',
    path: '/v1/sandboxes/:id/exec',
    summary:
      "Run a command (an argv array, never a shell string) in a READY sandbox, after the operations before it. JSON: the result with stdout and stderr (at most 1 MiB each). With `Accept: application/x-ndjson`: `output` lines (base64 bytes) as the program writes, then one `result` line, or an `error` line if it fails after the stream began. A limit hit destroys the sandbox (`limitHit`, `sandboxState: DESTROYED`). A sandbox that is not READY is 409 E_CONFLICT.",
    scope: 'runs:write',
    status: 200,
    response: 'ExecResult',
    ndjson: 'ExecStreamLine',
    pathParams: SANDBOX_ID,
    requestBody: { component: 'ExecRequest', required: true },
    errors: ['E_INPUT', 'E_TOO_LARGE', 'E_NOT_FOUND', 'E_CONFLICT', 'E_UNAVAILABLE'],
  },
  putSandboxFile: {
    operationId: 'putSandboxFile',
    method: 'PUT',
    path: '/v1/sandboxes/:id/files',
    summary:
      'Write a file in a READY sandbox: the body is its bytes (application/octet-stream, at most 16 MiB), `path` is under /work, /out or /tmp. A symlink anywhere on the path inside the sandbox is E_INPUT.',
    scope: 'runs:write',
    status: 200,
    response: 'FileWritten',
    pathParams: SANDBOX_ID,
    query: PutFileQuerySchema,
    requestBody: { component: 'FileBytes', required: true, contentType: 'application/octet-stream' },
    errors: ['E_INPUT', 'E_TOO_LARGE', 'E_NOT_FOUND', 'E_CONFLICT', 'E_UNAVAILABLE'],
  },
  getSandboxFile: {
    operationId: 'getSandboxFile',
    method: 'GET',
    path: '/v1/sandboxes/:id/files',
    summary: 'Read a file of a READY sandbox as raw bytes (its read is a receipt too). A missing file is 404; a directory or a symlink E_INPUT.',
    scope: 'runs:read',
    status: 200,
    response: 'bytes',
    pathParams: SANDBOX_ID,
    query: GetFileQuerySchema,
    responseHeaders: { 'X-Cairn-Sha256': 'sha256 (hex) of the bytes', 'X-Cairn-Seq': 'the seq of the sandbox.file.read receipt' },
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_CONFLICT', 'E_UNAVAILABLE'],
  },
  listSandboxEvents: {
    operationId: 'listSandboxEvents',
    method: 'GET',
    path: '/v1/sandboxes/:id/events',
    summary: "A sandbox's receipts in chain order, exactly as stored, after a seq.",
    scope: 'runs:read',
    status: 200,
    response: 'EventPage',
    pathParams: SANDBOX_ID,
    query: ListEventsQuerySchema,
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_UNAVAILABLE'],
  },
  streamSandboxEvents: {
    operationId: 'streamSandboxEvents',
    method: 'GET',
    path: '/v1/sandboxes/:id/events/stream',
    summary: "A sandbox's receipts as Server-Sent Events, as for a run (`id: <sandbox id>:<seq>`); closed after run.sealed.",
    scope: 'runs:read',
    status: 200,
    response: 'sse',
    pathParams: SANDBOX_ID,
    query: StreamEventsQuerySchema,
    headers: {
      'Last-Event-ID': { schema: LastEventIdSchema, required: false, description: 'Resume after this event (wins over `after`).' },
    },
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_RATE_LIMITED', 'E_UNAVAILABLE'],
  },
  getSandboxBundle: {
    operationId: 'getSandboxBundle',
    method: 'GET',
    path: '/v1/sandboxes/:id/bundle',
    summary: "The sandbox chain's proof bundle (cairn.bundle/v1, `runId` naming the sandbox): receipts and the hashes of every exec's output and file written; verifiable offline.",
    scope: 'runs:read',
    status: 200,
    response: 'ProofBundle',
    pathParams: SANDBOX_ID,
    errors: ['E_INPUT', 'E_NOT_FOUND', 'E_UNAVAILABLE'],
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
