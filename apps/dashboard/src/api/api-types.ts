/*
 * The REST contract's shapes the pages read: @cairn/contracts' own types (type-only imports, so
 * nothing of the schemas is bundled for them), under the names the pages use.
 */
import type { KeyCreated, KeyList, KeyView, TenantList } from '@cairn/contracts';

export { API_KEY_SCOPES, RUN_STATES } from '@cairn/contracts';
export type { ApiKeyScope, ListRunsQuery, PolicyInForce, QueueSpot, Run, RunList, RunState, Sandbox, SandboxList, TenantList, Worker, WorkerList } from '@cairn/contracts';
export type { ApprovalRequest as Approval } from '@cairn/contracts';

export type ApiKey = KeyView;
/** A key just created or rotated: the one answer that holds its secret. */
export type CreatedApiKey = KeyCreated;
export type ApiKeyList = KeyList;
export type Tenant = TenantList['items'][number];

/** A receipt exactly as stored: the envelope every one has, and its type's own fields. */
export type Receipt = Record<string, unknown> & { seq: number; type: string; ts: string; actor: string; run_id: string; hash: string; prev_hash: string };
