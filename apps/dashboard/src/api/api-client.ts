import { forgetApiKey, storedApiKey } from './session.js';
import type { ApiKey, ApiKeyList, Approval, CreatedApiKey, PolicyInForce, Receipt, Run, RunList, Sandbox, SandboxList, TenantList, WorkerList } from './api-types.js';

/** An answer of the API that is not a success: its status and the contract's `{ code, message }`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** Called when the gateway refuses the key (401): the app goes back to the sign-in page. */
let onUnauthorized: () => void = () => undefined;
export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

export function authHeaders(key: string | null = storedApiKey()): Record<string, string> {
  return key === null ? {} : { authorization: `Bearer ${key}` };
}

async function errorOf(response: Response): Promise<ApiError> {
  let code = 'E_INTERNAL';
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = (await response.json()) as { code?: unknown; message?: unknown };
    if (typeof body.code === 'string') code = body.code;
    if (typeof body.message === 'string') message = body.message;
  } catch {
    // Not the contract's body: keep the status line.
  }
  return new ApiError(response.status, code, message);
}

export async function request<T>(path: string, init: RequestInit = {}, key: string | null = storedApiKey()): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', ...authHeaders(key), ...(init.headers as Record<string, string> | undefined) };
  const response = await fetch(path, { ...init, headers, credentials: 'omit', cache: 'no-store' });
  if (!response.ok) {
    const error = await errorOf(response);
    if (response.status === 401 && key !== null) {
      forgetApiKey();
      onUnauthorized();
    }
    throw error;
  }
  return (await response.json()) as T;
}

/** A chain the API serves receipts of: a run's (`run_…`) or an interactive sandbox's (`sbx_…`). */
export interface ChainRef {
  kind: 'runs' | 'sandboxes';
  id: string;
}

export function chainPath(chain: ChainRef): string {
  return `/v1/${chain.kind}/${encodeURIComponent(chain.id)}`;
}

export interface RunFilter {
  state?: string | undefined;
  createdAfter?: string | undefined;
  createdBefore?: string | undefined;
  cursor?: string | undefined;
  limit?: number | undefined;
}

function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined && value !== '') search.set(name, String(value));
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}

/** A fresh Idempotency-Key (getRandomValues works outside secure contexts too, unlike randomUUID). */
function freshIdempotencyKey(): string {
  return `dash-${Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}

export const api = {
  /** Checks a key before it is kept: a cheap keyed read. */
  checkKey: (key: string) => request<RunList>('/v1/runs?limit=1', {}, key),
  runs: (filter: RunFilter) => request<RunList>(`/v1/runs${query({ ...filter })}`),
  run: (runId: string) => request<Run>(`/v1/runs/${encodeURIComponent(runId)}`),
  /** Every receipt of a chain after `after`, page by page. */
  async receipts(chain: ChainRef, after = 0): Promise<Receipt[]> {
    const all: Receipt[] = [];
    let next: number | null = after;
    while (next !== null) {
      const page: { items: Receipt[]; nextAfter: number | null } = await request(`${chainPath(chain)}/events${query({ after: next, limit: 1000 })}`);
      all.push(...page.items);
      next = page.nextAfter;
    }
    return all;
  },
  decide: (runId: string, approval: Approval) =>
    request<{ runId: string; state: string; duplicate: boolean }>(`/v1/runs/${encodeURIComponent(runId)}/approvals`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(approval),
    }),
  workers: () => request<WorkerList>('/v1/workers'),
  policy: () => request<PolicyInForce>('/v1/policy'),
  sandboxes: (state?: string) => request<SandboxList>(`/v1/sandboxes${query({ state, limit: 100 })}`),
  sandbox: (id: string) => request<Sandbox>(`/v1/sandboxes/${encodeURIComponent(id)}`),
  keys: (tenant?: string) => request<ApiKeyList>(`/v1/keys${query({ tenant })}`),
  createKey: (body: { scopes: string[]; expiresAt?: string; tenant?: string }) =>
    request<CreatedApiKey>('/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': freshIdempotencyKey() }, body: JSON.stringify(body) }),
  revokeKey: (id: string) => request<ApiKey>(`/v1/keys/${encodeURIComponent(id)}/revoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }),
  tenants: () => request<TenantList>('/v1/tenants'),
};
