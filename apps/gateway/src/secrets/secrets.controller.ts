import { CairnError, SecretNameSchema } from '@cairn/contracts';
import type { SecretStore } from '@cairn/secret-store';
import { withoutTrailingNewline } from '@cairn/secrets';
import { JsonLogger } from '@cairn/service-kit';
import { Body, Controller, Inject, Param } from '@nestjs/common';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { API_ROUTES } from '../http/api-routes.js';
import type { SecretDeleted, SecretList, SecretStored } from './secrets.schemas.js';
import { GATEWAY_SECRET_STORE } from './secret-store.token.js';
import type { GatewaySecrets } from './secret-store.token.js';

const SECRET_NAME = { schema: SecretNameSchema };

/**
 * `/v1/secrets…`: the tenant's secret store, write-only. A value comes in as the text/plain body
 * (bytes, parsed as such by `start-gateway`) and never goes out; the log names the secret and the
 * key that acted, never the value.
 */
@Controller()
export class SecretsController {
  constructor(
    @Inject(GATEWAY_SECRET_STORE) private readonly secrets: GatewaySecrets,
    private readonly logger: JsonLogger,
  ) {}

  @ApiRoute(API_ROUTES.putSecret)
  async put(@CurrentPrincipal() principal: Principal, @Param('name', SECRET_NAME) name: string, @Body() body: unknown): Promise<SecretStored> {
    const store = this.ready();
    if (!(body instanceof Uint8Array)) {
      throw new CairnError('E_INPUT', 'send the value as the request body, with Content-Type: text/plain', { field: 'body' });
    }
    try {
      // As `cairn secrets set` does: a value sent with `curl --data-binary @file` keeps no line break of the file's.
      const stored = await store.put(principal.tenant, name, withoutTrailingNewline(body));
      this.logger.write('info', 'secret stored', { tenant: principal.tenant, name, key_id: principal.keyId, created: stored.created });
      return { name, created: stored.created, lastFour: stored.lastFour, createdAt: stored.createdAt.toISOString(), updatedAt: stored.updatedAt.toISOString() };
    } finally {
      body.fill(0);
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
        createdAt: secret.createdAt.toISOString(),
        updatedAt: secret.updatedAt.toISOString(),
      })),
    };
  }

  @ApiRoute(API_ROUTES.deleteSecret)
  async delete(@CurrentPrincipal() principal: Principal, @Param('name', SECRET_NAME) name: string): Promise<SecretDeleted> {
    if (!(await this.ready().delete(principal.tenant, name))) throw new CairnError('E_NOT_FOUND', `no secret ${name}`, { name });
    this.logger.write('info', 'secret deleted', { tenant: principal.tenant, name, key_id: principal.keyId });
    return { name, deleted: true };
  }

  private ready(): SecretStore {
    if (this.secrets.store === null) {
      throw new CairnError('E_UNAVAILABLE', 'this gateway has no secret store: start it with CAIRN_SECRETS_KEY_FILE (cairn up creates the key file)');
    }
    return this.secrets.store;
  }
}
