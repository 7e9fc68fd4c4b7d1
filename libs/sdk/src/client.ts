import type { ApiRouteName } from '@cairn/contracts';
import { Keys, Operator, Secrets, Tenants, Webhooks } from './administration.js';
import { Chains } from './chains.js';
import { Images } from './images.js';
import { Runs } from './runs.js';
import { Sandboxes } from './sandboxes.js';
import { Tlog } from './tlog.js';
import { Transport } from './transport.js';
import type { CairnOptions } from './transport.js';

/*
 * The browser-safe entry point of @cairn/sdk: the client, typed by @cairn/contracts. (The package's
 * main entry adds the offline chain verifier, which hashes with node:crypto.)
 */

/**
 * A client of one Cairn REST gateway, acting with one API key:
 *
 * ```ts
 * const cairn = new Cairn({ url: 'http://127.0.0.1:7420', apiKey: process.env.CAIRN_API_KEY });
 * const { runId } = await cairn.runs.submit({ name: 'hello', steps: [{ argv: ['echo', 'hello'] }] });
 * const run = await cairn.runs.wait(runId);
 * ```
 */
export class Cairn {
  readonly runs: Runs;
  /** Images built from a Dockerfile by a worker. */
  readonly images: Images;
  readonly sandboxes: Sandboxes;
  readonly secrets: Secrets;
  readonly keys: Keys;
  readonly tenants: Tenants;
  readonly webhooks: Webhooks;
  /** The stack's health, workers and policy. */
  readonly operator: Operator;
  /** The log of seal heads: signed checkpoints, inclusion and consistency proofs. */
  readonly tlog: Tlog;
  /** Any chain's receipts by id (`run_…`, `sbx_…`, `adm_…`): pages, a live stream, the proof bundle. */
  readonly chains: Chains;
  /** The gateway's base URL, as given (without a trailing slash). */
  readonly url: string;

  constructor(options: CairnOptions) {
    const http = new Transport(options);
    this.url = http.baseUrl;
    this.chains = new Chains(http);
    this.runs = new Runs(http, this.chains);
    this.images = new Images(http);
    this.sandboxes = new Sandboxes(http, this.chains);
    this.secrets = new Secrets(http);
    this.keys = new Keys(http);
    this.tenants = new Tenants(http, this.chains);
    this.webhooks = new Webhooks(http);
    this.operator = new Operator(http);
    this.tlog = new Tlog(http);
  }
}

/**
 * Which method of the client serves each route of the REST contract: a `Record` over the route
 * table, so a route added to the contracts fails the type check here until the SDK serves it
 * (and a unit test checks each method exists).
 */
export const SDK_OPERATIONS: Readonly<Record<ApiRouteName, string>> = {
  submitRun: 'runs.submit',
  submitHarborTask: 'runs.submitHarborTask',
  buildImage: 'images.build',
  listRuns: 'runs.list',
  getRun: 'runs.get',
  listEvents: 'runs.events',
  streamEvents: 'runs.follow',
  getBundle: 'runs.bundle',
  getRunArtifacts: 'runs.artifacts',
  getStepOutput: 'runs.output',
  getRunArtifact: 'runs.artifact',
  cancelRun: 'runs.cancel',
  regradeRun: 'runs.regrade',
  decideApproval: 'runs.decide',
  putSecret: 'secrets.put',
  listSecrets: 'secrets.list',
  deleteSecret: 'secrets.delete',
  listSecretGrants: 'secrets.grants',
  grantSecret: 'secrets.grant',
  revokeSecretGrant: 'secrets.revoke',
  createWebhook: 'webhooks.create',
  listWebhooks: 'webhooks.list',
  deleteWebhook: 'webhooks.delete',
  listWebhookDeliveries: 'webhooks.deliveries',
  replayWebhookDelivery: 'webhooks.replay',
  createKey: 'keys.create',
  listKeys: 'keys.list',
  rotateKey: 'keys.rotate',
  revokeKey: 'keys.revoke',
  createTenant: 'tenants.create',
  listTenants: 'tenants.list',
  getTenant: 'tenants.get',
  listTenantEvents: 'tenants.events',
  getTenantBundle: 'tenants.bundle',
  listWorkers: 'operator.workers',
  drainWorker: 'operator.drainWorker',
  undrainWorker: 'operator.undrainWorker',
  getPolicy: 'operator.policy',
  createSandbox: 'sandboxes.create',
  listSandboxes: 'sandboxes.list',
  getSandbox: 'sandboxes.get',
  deleteSandbox: 'sandboxes.destroy',
  execSandbox: 'sandboxes.exec',
  putSandboxFile: 'sandboxes.writeFile',
  getSandboxFile: 'sandboxes.readFile',
  getExecOutput: 'sandboxes.execOutput',
  listSandboxEvents: 'sandboxes.events',
  streamSandboxEvents: 'sandboxes.follow',
  getSandboxBundle: 'sandboxes.bundle',
  health: 'operator.health',
  getSealKeys: 'operator.sealKeys',
  getTlogCheckpoint: 'tlog.checkpoint',
  getTlogInclusionProof: 'tlog.inclusion',
  getTlogConsistencyProof: 'tlog.consistency',
  metrics: 'operator.metrics',
  openApi: 'operator.openApi',
};

export { Keys, Operator, Secrets, Tenants, Webhooks } from './administration.js';
export { canHash, decodeText, decodeUtf8, fromBase64, sha256Hex, toBase64 } from './bytes.js';
export { chainBase, Chains } from './chains.js';
export type { EventsOptions, FollowOptions } from './chains.js';
export { conform, WireReceiptSchema } from './conform.js';
export type { Validation } from './conform.js';
export { DEFAULT_MAX_READ_BYTES, openBytes, readBytes } from './outputs.js';
export type { Bytes, OpenedBytes, ReadOptions } from './outputs.js';
export { Images } from './images.js';
export type { BuildFile } from './images.js';
export { freshIdempotencyKey, Runs } from './runs.js';
export type { RunOutputs, WaitOptions } from './runs.js';
export { SandboxSession, Sandboxes } from './sandboxes.js';
export { Tlog } from './tlog.js';
export type { ExecInput, ExecSummary } from './sandboxes.js';
export { createSseParser, readSse } from './sse.js';
export type { SseMessage, SseParser } from './sse.js';
export { MAX_NDJSON_LINE, readNdjson } from './streams.js';
export { routePath, statusOf, Transport } from './transport.js';
export type { ApiKeySource, CairnOptions, RequestOptions } from './transport.js';
// The contracts' types the answers come as, and the error the client throws (identified by its code).
export { CairnError, ERROR_CODES, isCairnError, OUTPUT_STREAMS, RUN_STATES, SANDBOX_STATES } from '@cairn/contracts';
export type {
  ApprovalAccepted,
  ApprovalRequest,
  Artifact,
  CancelAccepted,
  ErrorBody,
  ErrorCode,
  EventPage,
  ExecRequest,
  ExecResult,
  FileWrittenAnswer,
  HarborSubmitAccepted,
  Health,
  ImageBuilt,
  KeyCreate,
  KeyCreated,
  KeyList,
  KeyView,
  OutputStream,
  PolicyInForce,
  ProofBundle,
  ProofBundleV2,
  QueueSpot,
  Receipt,
  Run,
  RunArtifacts,
  RunList,
  RunSpec,
  RunState,
  Sandbox,
  SandboxList,
  SandboxSpec,
  SandboxState,
  SealKeys,
  Secret,
  SecretGrants,
  SecretList,
  SecretStored,
  StepOutputs,
  SubmitAccepted,
  TenantList,
  TenantView,
  TlogCheckpoint,
  TlogConsistencyProof,
  TlogInclusionProof,
  Verdict,
  WorkerList,
} from '@cairn/contracts';
