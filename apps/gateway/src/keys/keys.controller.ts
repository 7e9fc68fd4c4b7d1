import { ApiKeyIdSchema, CairnError } from '@cairn/contracts';
import { Body, Controller, Headers, Param, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { API_ROUTES } from '../http/api-routes.js';
import { IdempotencyKeySchema } from '../http/api.schemas.js';
import { KeyAdministration } from './key-admin.service.js';
import { KeyCreateSchema, KeyRevokeSchema, KeyRotateSchema, ListKeysQuerySchema } from './keys.schemas.js';
import type { KeyCreate, KeyCreated, KeyList, KeyRevoke, KeyRotate, KeyView, ListKeysQuery } from './keys.schemas.js';

const KEY_ID = { schema: ApiKeyIdSchema };

function optionalIdempotencyKey(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const parsed = IdempotencyKeySchema.safeParse(header);
  if (parsed.success) return parsed.data;
  throw new CairnError('E_INPUT', 'Idempotency-Key: 1–200 printable ASCII characters', { field: 'Idempotency-Key' });
}

/**
 * `/v1/keys…`: a tenant's API keys, administered by its admin keys (the operator's for any tenant).
 * A key's secret is in the answer to its creation and to each rotation, and nowhere else.
 */
@Controller()
export class KeysController {
  constructor(private readonly keys: KeyAdministration) {}

  @ApiRoute(API_ROUTES.createKey)
  async create(
    @CurrentPrincipal() principal: Principal,
    @Headers('idempotency-key') header: string | undefined,
    @Body({ schema: KeyCreateSchema }) body: KeyCreate,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<KeyCreated> {
    const created = await this.keys.createKey(principal, body, optionalIdempotencyKey(header));
    // Nobody may keep the answer that holds the secret.
    void reply.header('cache-control', 'no-store');
    return created;
  }

  @ApiRoute(API_ROUTES.listKeys)
  async list(@CurrentPrincipal() principal: Principal, @Query({ schema: ListKeysQuerySchema }) query: ListKeysQuery): Promise<KeyList> {
    return { items: await this.keys.listKeys(principal, query.tenant) };
  }

  @ApiRoute(API_ROUTES.rotateKey)
  async rotate(
    @CurrentPrincipal() principal: Principal,
    @Param('id', KEY_ID) id: string,
    @Body({ schema: KeyRotateSchema.optional() }) body: KeyRotate | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<KeyCreated> {
    const rotated = await this.keys.rotateKey(principal, id, body?.graceSeconds ?? 0);
    void reply.header('cache-control', 'no-store');
    return rotated;
  }

  @ApiRoute(API_ROUTES.revokeKey)
  revoke(@CurrentPrincipal() principal: Principal, @Param('id', KEY_ID) id: string, @Body({ schema: KeyRevokeSchema.optional() }) body: KeyRevoke | undefined): Promise<KeyView> {
    return this.keys.revokeKey(principal, id, body?.reason);
  }
}
