import { API_ROUTES, CairnError, holdsGrant, PutSecretQuerySchema, SecretGranteeSchema, SecretGrantRequestSchema, SecretNameSchema } from '@cairn/contracts';
import type { PutSecretQuery, SecretDeleted, SecretGrant, SecretGrantRequest, SecretGrants, SecretList, SecretStored, SubmitterPrincipal } from '@cairn/contracts';
import type { SecretCatalog, SecretGrant as StoredGrant, SecretRecord } from '@cairn/secret-store';
import { withoutTrailingNewline } from '@cairn/secrets';
import { JsonLogger } from '@cairn/service-kit';
import { Body, Controller, Inject, Param, Query } from '@nestjs/common';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { GATEWAY_SECRET_STORE } from './secret-store.token.js';
import type { GatewaySecrets } from './secret-store.token.js';
import { TenantKeysRepository } from './tenant-keys.repository.js';

const SECRET_NAME = { schema: SecretNameSchema };
const GRANTEE = { schema: SecretGranteeSchema };

function actorOf(principal: Principal): string {
  return `key:${principal.keyId}`;
}

function asSubmitter(principal: Principal): SubmitterPrincipal {
  return { key_id: principal.keyId, scopes: [...principal.scopes] };
}

function grantView(grant: StoredGrant): SecretGrant {
  return { grantee: grant.grantee, grantedBy: grant.grantedBy, grantedAt: grant.grantedAt.toISOString() };
}

/**
 * `/v1/secrets…`: the tenant's secret store, write-only, and who may use each secret. A value comes
 * in as the text/plain body (bytes, parsed as such by `start-gateway`) and never goes out; the log
 * names the secret and the key that acted, never the value. An existing secret is changed
 * (replaced, granted, revoked, removed) only by a key that holds a grant of it, or an admin key:
 * a `secrets:write` key may not grant itself another key's credential.
 */
@Controller()
export class SecretsController {
  constructor(
    @Inject(GATEWAY_SECRET_STORE) private readonly secrets: GatewaySecrets,
    private readonly keys: TenantKeysRepository,
    private readonly logger: JsonLogger,
  ) {}

  @ApiRoute(API_ROUTES.putSecret)
  async put(
    @CurrentPrincipal() principal: Principal,
    @Param('name', SECRET_NAME) name: string,
    @Query({ schema: PutSecretQuerySchema }) query: PutSecretQuery,
    @Body() body: unknown,
  ): Promise<SecretStored> {
    try {
      const store = this.ready();
      if (!(body instanceof Uint8Array)) {
        throw new CairnError('E_INPUT', 'send the value as the request body, with Content-Type: text/plain', { field: 'body' });
      }
      const grants = query.grant === undefined ? [] : [query.grant].flat();
      await this.mayChange(store, principal, name, { absentIsFine: true });
      await this.checkGrantees(principal.tenant, grants);
      // As `cairn secrets set` does: a value sent with `curl --data-binary @file` keeps no line break of the file's.
      const stored = await store.put(principal.tenant, name, withoutTrailingNewline(body), { setBy: actorOf(principal), grants, guard: (held) => held === null || this.holds(principal, name, held) });
      this.logger.write('info', 'secret stored', { tenant: principal.tenant, name, key_id: principal.keyId, created: stored.created, granted: grants });
      return { name, created: stored.created, lastFour: stored.lastFour, createdAt: stored.createdAt.toISOString(), updatedAt: stored.updatedAt.toISOString() };
    } finally {
      if (body instanceof Uint8Array) body.fill(0);
    }
  }

  @ApiRoute(API_ROUTES.listSecrets)
  async list(@CurrentPrincipal() principal: Principal): Promise<SecretList> {
    const listed = await this.ready().list(principal.tenant);
    return {
      items: listed.map((secret) => ({
        name: secret.name,
        lastFour: secret.lastFour,
        keyId: secret.keyId,
        setBy: secret.setBy,
        grants: secret.grants.map(grantView),
        createdAt: secret.createdAt.toISOString(),
        updatedAt: secret.updatedAt.toISOString(),
      })),
    };
  }

  @ApiRoute(API_ROUTES.deleteSecret)
  async delete(@CurrentPrincipal() principal: Principal, @Param('name', SECRET_NAME) name: string): Promise<SecretDeleted> {
    const store = this.ready();
    await this.mayChange(store, principal, name);
    if (!(await store.delete(principal.tenant, name, (held) => this.holds(principal, name, held)))) throw new CairnError('E_NOT_FOUND', `no secret ${name}`, { name });
    this.logger.write('info', 'secret deleted', { tenant: principal.tenant, name, key_id: principal.keyId });
    return { name, deleted: true };
  }

  @ApiRoute(API_ROUTES.listSecretGrants)
  async grants(@CurrentPrincipal() principal: Principal, @Param('name', SECRET_NAME) name: string): Promise<SecretGrants> {
    const store = this.ready();
    if ((await store.access(principal.tenant, [name])).length === 0) throw new CairnError('E_NOT_FOUND', `no secret ${name}`, { name });
    return { name, grants: (await store.grantsOf(principal.tenant, name)).map(grantView) };
  }

  @ApiRoute(API_ROUTES.grantSecret)
  async grant(
    @CurrentPrincipal() principal: Principal,
    @Param('name', SECRET_NAME) name: string,
    @Body({ schema: SecretGrantRequestSchema }) request: SecretGrantRequest,
  ): Promise<SecretGrants> {
    const store = this.ready();
    await this.mayChange(store, principal, name);
    await this.checkGrantees(principal.tenant, request.grantees);
    const grants = await store.grant(principal.tenant, name, request.grantees, actorOf(principal), (held) => this.holds(principal, name, held));
    this.logger.write('info', 'secret granted', { tenant: principal.tenant, name, key_id: principal.keyId, granted: request.grantees });
    return { name, grants: grants.map(grantView) };
  }

  @ApiRoute(API_ROUTES.revokeSecretGrant)
  async revoke(
    @CurrentPrincipal() principal: Principal,
    @Param('name', SECRET_NAME) name: string,
    @Param('grantee', GRANTEE) grantee: string,
  ): Promise<SecretGrants> {
    const store = this.ready();
    await this.mayChange(store, principal, name);
    if (!(await store.revoke(principal.tenant, name, grantee, (held) => this.holds(principal, name, held)))) throw new CairnError('E_NOT_FOUND', `secret ${name} has no grant to ${grantee}`, { name, grantee });
    this.logger.write('info', 'secret grant revoked', { tenant: principal.tenant, name, key_id: principal.keyId, revoked: grantee });
    return { name, grants: (await store.grantsOf(principal.tenant, name)).map(grantView) };
  }

  /**
   * An existing secret is changed only by a key holding a grant of it (or an admin key): else
   * E_FORBIDDEN — not E_NOT_FOUND, since the name is listed to every secrets:write key anyway.
   * A secret that does not exist is E_NOT_FOUND, unless the change creates it (a put).
   */
  private async mayChange(store: SecretCatalog, principal: Principal, name: string, options: { absentIsFine?: boolean } = {}): Promise<void> {
    const [secret] = await store.access(principal.tenant, [name]);
    if (secret === undefined) {
      if (options.absentIsFine === true) return;
      throw new CairnError('E_NOT_FOUND', `no secret ${name}`, { name });
    }
    if (!holdsGrant(asSubmitter(principal), secret.grantees)) {
      throw new CairnError('E_FORBIDDEN', `secret ${name} is not granted to this key: only a key holding a grant of it, or an admin key, may change it`, { name });
    }
  }

  /** The same check on the record a change writes over (its compare-and-set revision): a grant revoked meanwhile counts. */
  private holds(principal: Principal, name: string, held: SecretRecord): true {
    if (!holdsGrant(asSubmitter(principal), held.grants.map((g) => g.grantee))) {
      throw new CairnError('E_FORBIDDEN', `secret ${name} is not granted to this key: only a key holding a grant of it, or an admin key, may change it`, { name });
    }
    return true;
  }

  /** Every `key:<id>` grantee must be a live key of the tenant (E_INPUT naming it); scopes need no check. */
  private async checkGrantees(tenant: string, grantees: readonly string[]): Promise<void> {
    const ids = grantees.filter((g) => g.startsWith('key:')).map((g) => g.slice('key:'.length));
    const live = await this.keys.live(tenant, ids);
    const unknown = ids.filter((id) => !live.has(id));
    if (unknown.length > 0) {
      throw new CairnError('E_INPUT', `no live API key ${unknown.map((id) => `key:${id}`).join(', ')} in this tenant to grant to`, { field: 'grant', grantees: unknown.map((id) => `key:${id}`) });
    }
  }

  private ready(): SecretCatalog {
    if (this.secrets.store === null) {
      throw new CairnError('E_UNAVAILABLE', 'this gateway has no secret catalog: start it with CAIRN_SECRETS_PUBLIC_KEY_FILE (cairn up creates the key files)');
    }
    return this.secrets.store;
  }
}
