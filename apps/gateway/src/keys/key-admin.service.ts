import { randomUUID } from 'node:crypto';
import { adminChainId, CairnError, hasScope } from '@cairn/contracts';
import type { ApiKeyScope } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import { CommandBus } from '@cairn/operational';
import type { CommandPayload, CommandReply, CommandVerb } from '@cairn/operational';
import { JsonLogger } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import { apiKeyLastFour, apiKeySha256, generateApiKey, generateApiKeyFor } from '../auth/api-key.codec.js';
import { BOOTSTRAP_ACTOR } from '../auth/api-key.store.js';
import type { Principal } from '../auth/api-key.store.js';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG } from '../gateway.tokens.js';
import { KeyAdminRepository } from './key-admin.repository.js';
import type { KeyRow, TenantRow } from './key-admin.repository.js';
import { MAX_KEY_LIFETIME_DAYS } from './keys.schemas.js';
import type { KeyCreate, KeyCreated, KeyStatus, KeyView, TenantView } from './keys.schemas.js';

/** The bootstrap tenant: its admin keys are the operator's, and administer every tenant. */
export const OPERATOR_TENANT = 'default';
const PREFIX_ATTEMPTS = 5;

function iso(date: Date | null): string | null {
  return date === null ? null : date.toISOString();
}

export function keyStatus(row: Pick<KeyRow, 'issued_at' | 'revoked_at' | 'expires_at'>, now: Date = new Date()): KeyStatus {
  if (row.revoked_at !== null) return 'revoked';
  if (row.issued_at === null) return 'pending';
  if (row.expires_at !== null && row.expires_at.getTime() <= now.getTime()) return 'expired';
  return 'active';
}

export function keyView(row: KeyRow, now: Date = new Date()): KeyView {
  const grace = row.previous_valid_until !== null && row.previous_valid_until.getTime() > now.getTime() ? row.previous_valid_until : null;
  return {
    id: row.id,
    tenant: row.tenant,
    prefix: row.prefix,
    lastFour: row.last_four,
    scopes: row.scopes,
    status: keyStatus(row, now),
    createdAt: row.created_at.toISOString(),
    createdBy: row.created_by,
    expiresAt: iso(row.expires_at),
    revokedAt: iso(row.revoked_at),
    rotations: row.rotations,
    rotatedAt: iso(row.rotated_at),
    previousValidUntil: iso(grace),
  };
}

export function tenantView(row: TenantRow): TenantView {
  return { id: row.id, chainId: adminChainId(row.id), createdAt: row.created_at.toISOString(), createdBy: row.created_by, recorded: row.recorded_at !== null };
}

/** The operator: an admin key of the bootstrap tenant. */
export function isOperator(principal: Principal): boolean {
  return principal.tenant === OPERATOR_TENANT && hasScope(principal.scopes, 'admin');
}

function actorOf(principal: Principal): string {
  return `key:${principal.keyId}`;
}

/** A key id derived from a creation's Idempotency-Key (per tenant), in the UUID shape of random ones. */
function idempotentKeyId(tenant: string, idempotencyKey: string): string {
  const hex = sha256Hex(`cairn.key-id/v1:${tenant}:${idempotencyKey}`);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${((parseInt(hex.slice(16, 17), 16) & 3) | 8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/**
 * Key and tenant administration (docs/adr/0011). Every act is recorded on the tenant's admin
 * chain by intake (the gateway appends nothing itself), in this order: the table keeps what only it
 * may hold (a hash) as inert material, the command records the act, then the table follows the
 * log. A key is accepted only once its creation is recorded; a rotated secret only once the
 * rotation is. A revocation is the exception: the row is refused first (fail closed), then
 * recorded, and the recorder finishes a recording that failed. Each step is idempotent, so a
 * retry after any crash converges and stores nothing twice.
 *
 * Who may do what: every route needs `admin`. A tenant's admin keys administer that tenant's keys;
 * another tenant's key is E_NOT_FOUND. The operator (an admin key of `default`) also creates and
 * lists tenants and administers any tenant's keys (a new tenant's first admin key included).
 */
@Injectable()
export class KeyAdministration {
  constructor(
    private readonly repository: KeyAdminRepository,
    private readonly bus: CommandBus,
    private readonly logger: JsonLogger,
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
  ) {}

  /** The tenant a principal acts on: its own, or (the operator only) the one it names. */
  private async targetTenant(principal: Principal, named: string | undefined): Promise<string> {
    if (named === undefined || named === principal.tenant) return principal.tenant;
    if (!isOperator(principal)) throw new CairnError('E_FORBIDDEN', `only the operator (an admin key of tenant ${OPERATOR_TENANT}) administers another tenant`, { tenant: named });
    if ((await this.repository.findTenant(named)) === null) throw new CairnError('E_NOT_FOUND', `no tenant ${named}`, { tenant: named });
    return named;
  }

  /** A key the principal may administer: its tenant's, or any for the operator. */
  private async ownKey(principal: Principal, id: string): Promise<KeyRow> {
    const row = await this.repository.findKey(id, isOperator(principal) ? null : principal.tenant);
    if (row === null) throw new CairnError('E_NOT_FOUND', `no key ${id}`, { id });
    return row;
  }

  private async send<V extends CommandVerb>(verb: V, payload: CommandPayload<V>, msgId: string, timeoutMs = this.config.CAIRN_GATEWAY_COMMAND_TIMEOUT_MS): Promise<void> {
    const reply: CommandReply = await this.bus.send(verb, payload, { msgId: sha256Hex(`${verb}:${msgId}`), timeoutMs });
    if (!reply.ok) throw new CairnError(reply.error.code, reply.error.message, reply.error.details);
  }

  /** The tenant's `admin.tenant_created` on its chain (tenants that predate the chain are recorded at their first act). */
  async recordTenant(tenant: TenantRow, timeoutMs?: number): Promise<void> {
    if (tenant.recorded_at !== null) return;
    await this.send('tenant_create', { tenant: tenant.id, requested_by: tenant.created_by ?? BOOTSTRAP_ACTOR }, `tenant:${tenant.id}`, timeoutMs);
    await this.repository.markTenantRecorded(tenant.id);
  }

  private async recordTenantOf(tenant: string, timeoutMs?: number): Promise<void> {
    // Keys made outside the product (SQL) may name a tenant the table never had: it exists from now on.
    if ((await this.repository.findTenant(tenant)) === null) await this.repository.insertTenant(tenant, BOOTSTRAP_ACTOR);
    const row = await this.repository.findTenant(tenant);
    if (row !== null) await this.recordTenant(row, timeoutMs);
  }

  /** The key's `admin.key_created` on its tenant's chain: a duplicate when it is there already. */
  async recordCreation(row: KeyRow, timeoutMs?: number): Promise<void> {
    await this.recordTenantOf(row.tenant, timeoutMs);
    await this.send(
      'key_create',
      {
        tenant: row.tenant,
        requested_by: row.created_by ?? BOOTSTRAP_ACTOR,
        key_id: row.id,
        prefix: row.prefix,
        scopes: row.scopes,
        expires_at: iso(row.expires_at),
      },
      `key:${row.id}`,
      timeoutMs,
    );
  }

  /**
   * An act is never on a chain before the creation of the key that did it: the bootstrap key's
   * (stored at start, recorded by the recorder) is recorded first if it is not yet.
   */
  private async recordActor(principal: Principal): Promise<void> {
    const actor = await this.repository.findKey(principal.keyId, null);
    if (actor?.unrecorded !== 'created') return;
    await this.recordCreation(actor);
    await this.repository.markRecorded(actor.id, 'created');
  }

  /** The key's `admin.key_revoked`: a duplicate when it is there already. */
  async recordRevocation(row: KeyRow, by: string, reason?: string, timeoutMs?: number): Promise<void> {
    await this.recordCreation(row, timeoutMs);
    await this.send('key_revoke', { tenant: row.tenant, requested_by: by, key_id: row.id, ...(reason === undefined ? {} : { reason }) }, `revoke:${row.id}`, timeoutMs);
    await this.repository.markRecorded(row.id, 'revoked');
  }

  async createKey(principal: Principal, body: KeyCreate, idempotencyKey: string | undefined, now: Date = new Date()): Promise<KeyCreated> {
    const tenant = await this.targetTenant(principal, body.tenant);
    const expiresAt = body.expiresAt === undefined ? null : new Date(body.expiresAt);
    if (expiresAt !== null && (Number.isNaN(expiresAt.getTime()) || expiresAt.getTime() <= now.getTime())) {
      throw new CairnError('E_INPUT', 'expiresAt must be a time in the future', { issues: [{ path: 'expiresAt', message: 'a time in the future' }] });
    }
    if (expiresAt !== null && expiresAt.getTime() > now.getTime() + MAX_KEY_LIFETIME_DAYS * 86_400_000) {
      throw new CairnError('E_INPUT', `a key lives at most ${MAX_KEY_LIFETIME_DAYS} days`, { issues: [{ path: 'expiresAt', message: `at most ${MAX_KEY_LIFETIME_DAYS} days ahead` }] });
    }
    const scopes: ApiKeyScope[] = [...body.scopes].sort();
    const requestSha256 = sha256Hex(canonicalJson({ tenant, scopes, expiresAt: iso(expiresAt) }));
    const id = idempotencyKey === undefined ? randomUUID() : idempotentKeyId(tenant, idempotencyKey);
    const by = actorOf(principal);
    await this.recordActor(principal);
    // Another tenant was checked to exist above; the caller's own exists because its key does.
    await this.recordTenantOf(tenant);

    return this.repository.withKeyLock(id, async () => {
      let key: string;
      const existing = await this.repository.findKey(id, null);
      if (existing !== null) {
        if (existing.request_sha256 !== requestSha256) throw new CairnError('E_IDEMPOTENCY_MISMATCH', 'this Idempotency-Key created a key with other grants before');
        if (existing.issued_at !== null) {
          throw new CairnError('E_CONFLICT', `this Idempotency-Key created key ${id} already; its secret was shown once: rotate the key for a new one`, { id });
        }
        // The first attempt's answer never arrived: nobody has its secret, so this one draws another.
        key = generateApiKeyFor(existing.prefix).key;
        await this.repository.replacePendingSecret(id, apiKeySha256(key), apiKeyLastFour(key));
      } else {
        key = await this.insertPending(id, tenant, scopes, expiresAt, by, idempotencyKey, requestSha256);
      }
      const row = await this.mustFind(id);
      await this.recordCreation(row);
      await this.repository.issueKey(id);
      const issued = await this.mustFind(id);
      this.logger.write('info', 'API key created', { tenant, key_id: id, prefix: issued.prefix, scopes, by });
      return { ...keyView(issued), key };
    });
  }

  private async insertPending(
    id: string,
    tenant: string,
    scopes: ApiKeyScope[],
    expiresAt: Date | null,
    createdBy: string,
    idempotencyKey: string | undefined,
    requestSha256: string,
  ): Promise<string> {
    const idempotencySha256 = idempotencyKey === undefined ? null : sha256Hex(idempotencyKey);
    // A 40-bit prefix can collide, very rarely: draw again.
    for (let attempt = 1; attempt <= PREFIX_ATTEMPTS; attempt++) {
      const { key, prefix } = generateApiKey();
      const inserted = await this.repository.insertPendingKey({
        id,
        prefix,
        sha256: apiKeySha256(key),
        lastFour: apiKeyLastFour(key),
        tenant,
        scopes,
        expiresAt,
        createdBy,
        idempotencySha256,
        requestSha256,
      });
      if (inserted) return key;
    }
    throw new CairnError('E_CONFLICT', `no free API key prefix after ${PREFIX_ATTEMPTS} attempts`);
  }

  private async mustFind(id: string): Promise<KeyRow> {
    const row = await this.repository.findKey(id, null);
    if (row === null) throw new CairnError('E_UNAVAILABLE', `key ${id} vanished while being administered; retry`, { id });
    return row;
  }

  async listKeys(principal: Principal, named: string | undefined): Promise<KeyView[]> {
    const tenant = await this.targetTenant(principal, named);
    const now = new Date();
    return (await this.repository.listKeys(tenant)).map((row) => keyView(row, now));
  }

  async rotateKey(principal: Principal, id: string, graceSeconds: number, now: Date = new Date()): Promise<KeyCreated> {
    await this.ownKey(principal, id);
    await this.recordActor(principal);
    return this.repository.withKeyLock(id, async () => {
      const row = await this.mustFind(id);
      const status = keyStatus(row, now);
      if (status === 'revoked' || status === 'pending') throw new CairnError('E_CONFLICT', `key ${id} is ${status}: it cannot be rotated`, { id, status });
      await this.recordCreation(row);
      // A rotation whose answer never arrived is on the chain already with this number: recorded
      // again it is a duplicate, and this attempt's secret is the one that takes its place.
      const rotation = row.rotations + 1;
      const { key } = generateApiKeyFor(row.prefix);
      const sha256 = apiKeySha256(key);
      await this.repository.beginRotation(id, sha256, apiKeyLastFour(key));
      const graceUntil = graceSeconds > 0 ? new Date(now.getTime() + graceSeconds * 1000) : null;
      const by = actorOf(principal);
      await this.send('key_rotate', { tenant: row.tenant, requested_by: by, key_id: id, rotation, grace_until: iso(graceUntil) }, `rotate:${id}:${rotation}`);
      if (!(await this.repository.finishRotation(id, rotation, sha256, graceUntil))) {
        throw new CairnError('E_CONFLICT', `key ${id} changed while it was being rotated; retry`, { id });
      }
      this.logger.write('info', 'API key rotated', { tenant: row.tenant, key_id: id, prefix: row.prefix, rotation, grace_seconds: graceSeconds, by });
      return { ...keyView(await this.mustFind(id)), key };
    });
  }

  async revokeKey(principal: Principal, id: string, reason: string | undefined): Promise<KeyView> {
    const row = await this.ownKey(principal, id);
    const by = actorOf(principal);
    // Refused from the very next request, before anything else can fail.
    if (await this.repository.revokeKey(id, by)) this.logger.write('info', 'API key revoked', { tenant: row.tenant, key_id: id, prefix: row.prefix, by });
    const revoked = await this.mustFind(id);
    if (id !== principal.keyId) await this.recordActor(principal);
    if (revoked.unrecorded === 'revoked') await this.recordRevocation(revoked, revoked.revoked_by ?? by, reason);
    return keyView(await this.mustFind(id));
  }

  async createTenant(principal: Principal, id: string): Promise<TenantView> {
    this.mustBeOperator(principal);
    const by = actorOf(principal);
    await this.recordActor(principal);
    const created = await this.repository.insertTenant(id, by);
    const row = await this.repository.findTenant(id);
    if (row === null) throw new CairnError('E_UNAVAILABLE', `tenant ${id} vanished while being created; retry`, { id });
    // A tenant whose creation was answered before is a conflict; one whose recording failed is finished now.
    if (!created && row.recorded_at !== null) throw new CairnError('E_CONFLICT', `tenant ${id} exists`, { id });
    await this.recordTenant(row);
    if (created) this.logger.write('info', 'tenant created', { tenant: id, by });
    const recorded = await this.repository.findTenant(id);
    return tenantView(recorded ?? row);
  }

  async listTenants(principal: Principal): Promise<TenantView[]> {
    this.mustBeOperator(principal);
    return (await this.repository.listTenants()).map(tenantView);
  }

  /** A tenant the principal may read: its own, or any for the operator; another is E_NOT_FOUND. */
  async getTenant(principal: Principal, id: string): Promise<TenantView> {
    const row = id === principal.tenant || isOperator(principal) ? await this.repository.findTenant(id) : null;
    if (row === null) throw new CairnError('E_NOT_FOUND', `no tenant ${id}`, { id });
    return tenantView(row);
  }

  private mustBeOperator(principal: Principal): void {
    if (!isOperator(principal)) throw new CairnError('E_FORBIDDEN', `tenants are the operator's: an admin key of tenant ${OPERATOR_TENANT}`);
  }
}
