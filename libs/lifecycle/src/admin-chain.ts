import { ADMIN_EVENT_TYPES, adminChainId, eventId, parseEvidenceReceipt } from '@cairn/contracts';
import type { ApiKeyScope, ErrorCode, EvidenceReceipt, ReceiptEnvelope } from '@cairn/contracts';

/*
 * A tenant's admin chain (`adm_<tenant>`, docs/adr/0011): its creation, then each of its keys'
 * creation, rotations and revocation. Folded here, pure, so intake decides every admin command from
 * the chain itself: a command already on the chain is a duplicate, however long after the first.
 */

/** One key as its tenant's admin chain tells it. */
export interface AdminKeyView {
  keyId: string;
  prefix: string;
  scopes: ApiKeyScope[];
  expiresAt: string | null;
  createdAt: string;
  createdBy: string;
  /** The event id of its `admin.key_created`: what its rotations and revocation are caused by. */
  createdEvent: string;
  rotations: number;
  lastRotatedAt: string | null;
  revokedAt: string | null;
}

export interface AdminChainView {
  chainId: string;
  tenant: string;
  /** The event id of `admin.tenant_created`; null while the chain does not start with it. */
  createdEvent: string | null;
  createdAt: string | null;
  keys: Map<string, AdminKeyView>;
  headSeq: number;
  /** Receipts on the chain that are not what an admin chain holds (or not in order). */
  anomalies: string[];
}

const ADMIN_TYPES: ReadonlySet<string> = new Set(ADMIN_EVENT_TYPES);

export function emptyAdminChain(tenant: string): AdminChainView {
  return { chainId: adminChainId(tenant), tenant, createdEvent: null, createdAt: null, keys: new Map(), headSeq: 0, anomalies: [] };
}

/** Folds the receipts of `adm_<tenant>` (as stored; one that breaks its contract is an anomaly, never acted on). */
export function foldAdminChain(tenant: string, stored: readonly ReceiptEnvelope[]): AdminChainView {
  const view = emptyAdminChain(tenant);
  for (const raw of stored) {
    view.headSeq = raw.seq;
    const parsed = parseEvidenceReceipt(raw);
    if (!parsed.ok) {
      view.anomalies.push(`seq ${raw.seq}: ${parsed.message}`);
      continue;
    }
    evolveAdmin(view, parsed.receipt);
  }
  return view;
}

function evolveAdmin(view: AdminChainView, receipt: EvidenceReceipt): void {
  const at = eventId(view.chainId, receipt.seq);
  if (!ADMIN_TYPES.has(receipt.type) || receipt.run_id !== view.chainId || receipt.tenant !== view.tenant) {
    view.anomalies.push(`seq ${receipt.seq}: ${receipt.type} does not belong on ${view.chainId}`);
    return;
  }
  switch (receipt.type) {
    case 'admin.tenant_created':
      if (view.createdEvent !== null) view.anomalies.push(`seq ${receipt.seq}: the tenant was created before`);
      else {
        view.createdEvent = at;
        view.createdAt = receipt.ts;
      }
      return;
    case 'admin.key_created': {
      if (view.keys.has(receipt.key_id)) {
        view.anomalies.push(`seq ${receipt.seq}: key ${receipt.key_id} was created before`);
        return;
      }
      view.keys.set(receipt.key_id, {
        keyId: receipt.key_id,
        prefix: receipt.prefix,
        scopes: [...receipt.scopes],
        expiresAt: receipt.expires_at,
        createdAt: receipt.ts,
        createdBy: receipt.created_by,
        createdEvent: at,
        rotations: 0,
        lastRotatedAt: null,
        revokedAt: null,
      });
      return;
    }
    case 'admin.key_rotated': {
      const key = view.keys.get(receipt.key_id);
      if (key === undefined || receipt.rotation !== key.rotations + 1) {
        view.anomalies.push(`seq ${receipt.seq}: rotation ${receipt.rotation} of key ${receipt.key_id} out of order`);
        return;
      }
      key.rotations = receipt.rotation;
      key.lastRotatedAt = receipt.ts;
      return;
    }
    case 'admin.key_revoked': {
      const key = view.keys.get(receipt.key_id);
      if (key === undefined) view.anomalies.push(`seq ${receipt.seq}: revocation of unknown key ${receipt.key_id}`);
      else key.revokedAt ??= receipt.ts;
      return;
    }
    default:
      // admin.policy_changed: recorded, changes no key.
      return;
  }
}

/** What an admin command asks, in the chain's words. */
export type AdminCommand =
  | { kind: 'tenant_create'; by: string }
  | { kind: 'key_create'; by: string; keyId: string; prefix: string; scopes: readonly ApiKeyScope[]; expiresAt: string | null }
  | { kind: 'key_rotate'; by: string; keyId: string; rotation: number; graceUntil: string | null }
  | { kind: 'key_revoke'; by: string; keyId: string; reason?: string };

type AdminType = (typeof ADMIN_EVENT_TYPES)[number];

/** An admin command decided: the receipt to append, nothing (it is on the chain already), or a refusal. */
export type AdminDecision =
  | {
      kind: 'append';
      type: AdminType;
      causation: string | null;
      /** Distinguishes same-type receipts with the same cause (the key, the rotation). */
      key?: string;
      fields: Record<string, unknown>;
    }
  | { kind: 'duplicate' }
  | { kind: 'refuse'; code: ErrorCode; message: string };

function refuse(code: ErrorCode, message: string): AdminDecision {
  return { kind: 'refuse', code, message };
}

/**
 * Decides an admin command from the chain. A tenant is created once; a key exists only on a
 * created tenant's chain; a rotation is the key's next (the same rotation again is a duplicate);
 * a revoked key stays revoked and takes no rotation.
 */
export function decideAdmin(view: AdminChainView, command: AdminCommand): AdminDecision {
  if (command.kind === 'tenant_create') {
    if (view.createdEvent !== null) return { kind: 'duplicate' };
    if (view.headSeq > 0) return refuse('E_CONFLICT', `${view.chainId} holds receipts but no admin.tenant_created`);
    return { kind: 'append', type: 'admin.tenant_created', causation: null, fields: { created_by: command.by } };
  }
  if (view.createdEvent === null) return refuse('E_NOT_FOUND', `no tenant ${view.tenant}`);
  const key = view.keys.get(command.keyId);
  switch (command.kind) {
    case 'key_create': {
      if (key !== undefined) {
        const same = key.prefix === command.prefix && key.expiresAt === command.expiresAt && sameScopes(key.scopes, command.scopes);
        return same ? { kind: 'duplicate' } : refuse('E_CONFLICT', `key ${command.keyId} was created before with other grants`);
      }
      return {
        kind: 'append',
        type: 'admin.key_created',
        causation: view.createdEvent,
        key: command.keyId,
        fields: { key_id: command.keyId, prefix: command.prefix, scopes: [...command.scopes], expires_at: command.expiresAt, created_by: command.by },
      };
    }
    case 'key_rotate': {
      if (key === undefined) return refuse('E_NOT_FOUND', `no key ${command.keyId}`);
      if (command.rotation <= key.rotations) return { kind: 'duplicate' };
      if (key.revokedAt !== null) return refuse('E_CONFLICT', `key ${command.keyId} is revoked: it cannot be rotated`);
      if (command.rotation !== key.rotations + 1) return refuse('E_CONFLICT', `key ${command.keyId} is at rotation ${key.rotations}, not ${command.rotation - 1}`);
      return {
        kind: 'append',
        type: 'admin.key_rotated',
        causation: key.createdEvent,
        key: String(command.rotation),
        fields: { key_id: command.keyId, rotation: command.rotation, grace_until: command.graceUntil, rotated_by: command.by },
      };
    }
    case 'key_revoke': {
      if (key === undefined) return refuse('E_NOT_FOUND', `no key ${command.keyId}`);
      if (key.revokedAt !== null) return { kind: 'duplicate' };
      return {
        kind: 'append',
        type: 'admin.key_revoked',
        causation: key.createdEvent,
        fields: { key_id: command.keyId, revoked_by: command.by, ...(command.reason === undefined ? {} : { reason: command.reason }) },
      };
    }
  }
}

function sameScopes(a: readonly ApiKeyScope[], b: readonly ApiKeyScope[]): boolean {
  return a.length === b.length && [...a].sort().join(',') === [...b].sort().join(',');
}

