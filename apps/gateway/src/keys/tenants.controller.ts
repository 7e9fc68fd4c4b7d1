import { adminChainId, TenantIdSchema } from '@cairn/contracts';
import { Body, Controller, Param, Query } from '@nestjs/common';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { API_ROUTES } from '../http/api-routes.js';
import { DEFAULT_EVENTS_PAGE, ListEventsQuerySchema } from '../http/api.schemas.js';
import type { EventPage, ListEventsQuery, ProofBundle } from '../http/api.schemas.js';
import { buildProofBundle } from '../runs/proof-bundle.builder.js';
import { RunReadsRepository } from '../runs/run-reads.repository.js';
import { KeyAdministration } from './key-admin.service.js';
import { TenantCreateSchema } from './keys.schemas.js';
import type { TenantCreate, TenantList, TenantView } from './keys.schemas.js';

const TENANT_ID = { schema: TenantIdSchema };

/**
 * `/v1/tenants…`: creating and listing tenants is the operator's; a tenant's admin reads its own
 * tenant and its admin chain (`adm_<tenant>`, as projected), another tenant's is E_NOT_FOUND.
 */
@Controller()
export class TenantsController {
  constructor(
    private readonly keys: KeyAdministration,
    private readonly chains: RunReadsRepository,
  ) {}

  @ApiRoute(API_ROUTES.createTenant)
  create(@CurrentPrincipal() principal: Principal, @Body({ schema: TenantCreateSchema }) body: TenantCreate): Promise<TenantView> {
    return this.keys.createTenant(principal, body.id);
  }

  @ApiRoute(API_ROUTES.listTenants)
  async list(@CurrentPrincipal() principal: Principal): Promise<TenantList> {
    return { items: await this.keys.listTenants(principal) };
  }

  @ApiRoute(API_ROUTES.getTenant)
  get(@CurrentPrincipal() principal: Principal, @Param('id', TENANT_ID) id: string): Promise<TenantView> {
    return this.keys.getTenant(principal, id);
  }

  @ApiRoute(API_ROUTES.listTenantEvents)
  async events(@CurrentPrincipal() principal: Principal, @Param('id', TENANT_ID) id: string, @Query({ schema: ListEventsQuerySchema }) query: ListEventsQuery): Promise<EventPage> {
    await this.keys.getTenant(principal, id);
    return this.chains.eventPage(adminChainId(id), query.after ?? 0, query.limit ?? DEFAULT_EVENTS_PAGE);
  }

  @ApiRoute(API_ROUTES.getTenantBundle)
  async bundle(@CurrentPrincipal() principal: Principal, @Param('id', TENANT_ID) id: string): Promise<ProofBundle> {
    await this.keys.getTenant(principal, id);
    return buildProofBundle(adminChainId(id), await this.chains.allReceipts(adminChainId(id)));
  }
}
