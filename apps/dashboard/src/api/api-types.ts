/* The REST contract's shapes the pages read (apps/gateway/src/http/api.schemas.ts; openapi.json). */

export const RUN_STATES = [
  'SUBMITTED',
  'AWAITING_APPROVAL',
  'SCHEDULED',
  'RUNNING',
  'EXECUTED',
  'VERIFIED',
  'GRADED',
  'SEALED',
  'FAILED',
  'ROLLBACK',
  'REJECTED',
  'CANCELLED',
] as const;
export type RunState = (typeof RUN_STATES)[number];

export interface Run {
  runId: string;
  tenant: string;
  name: string | null;
  state: RunState;
  errorCode: string | null;
  verdict: 'SUPPORTS' | 'INCONCLUSIVE' | 'REJECTED' | null;
  score: number | null;
  maxScore: number | null;
  upperBound: number | null;
  createdAt: string;
  updatedAt: string;
  eventCount: number;
  headHash: string;
  sealed: boolean;
}

export interface RunList {
  items: Run[];
  nextCursor: string | null;
}

/** A receipt exactly as stored: the envelope every one has, and its type's own fields. */
export type Receipt = Record<string, unknown> & { seq: number; type: string; ts: string; actor: string; run_id: string; hash: string; prev_hash: string };

export interface Approval {
  decision: 'approve' | 'reject';
  approvalId?: string;
  comment?: string;
}

export interface Worker {
  workerId: string;
  healthy: boolean;
  draining: boolean;
  slots: number;
  inFlight: number;
  capacity: { slots: number; memoryMiB: number; cpus: number; diskMiB: number };
  lastHeartbeatAt: string;
  images: Record<string, string>;
}
export interface WorkerList {
  items: Worker[];
}

export interface PolicyInForce {
  version: string;
  source: 'file' | 'default';
  policy: Record<string, unknown>;
  lastDecision: { version: string; runId: string; at: string } | null;
}

/** /tmp/briefs/sandbox-rest-contract.md: the `Sandbox` view. */
export interface Sandbox {
  id: string;
  tenant: string;
  state: 'PENDING' | 'READY' | 'DESTROYED' | 'REJECTED' | 'FAILED';
  image: string | null;
  imageId: string | null;
  caps: Record<string, number> | null;
  network: unknown;
  workerId: string | null;
  createdAt: string;
  readyAt: string | null;
  expiresAt: string | null;
  idleSeconds: number | null;
  lastActivityAt: string;
  operations: number;
  destroyReason: string | null;
  errorCode: string | null;
  headSeq: number;
  headHash: string;
  sealed: boolean;
}
export interface SandboxList {
  items: Sandbox[];
  nextCursor: string | null;
}

/** An API key as GET /v1/keys lists it: never its secret. */
export interface ApiKey {
  id: string;
  tenant: string;
  prefix: string;
  lastFour: string | null;
  scopes: string[];
  status: 'active' | 'expired' | 'revoked' | 'pending';
  createdAt: string;
  createdBy: string | null;
  expiresAt: string | null;
  revokedAt: string | null;
  rotations: number;
  rotatedAt: string | null;
  previousValidUntil: string | null;
}

/** A key just created or rotated: the one answer that holds its secret. */
export interface CreatedApiKey extends ApiKey {
  key: string;
}

export interface ApiKeyList {
  items: ApiKey[];
}

export interface Tenant {
  id: string;
  chainId: string;
  createdAt: string;
  createdBy: string | null;
  recorded: boolean;
}

export interface TenantList {
  items: Tenant[];
}
