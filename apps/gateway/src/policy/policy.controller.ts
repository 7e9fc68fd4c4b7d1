import { API_ROUTES } from '@cairn/contracts';
import type { PolicyInForce } from '@cairn/contracts';
import { Controller, Inject } from '@nestjs/common';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG } from '../gateway.tokens.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { RunReadsRepository } from '../runs/run-reads.repository.js';
import { loadPolicyInForce } from './policy-in-force.js';

/** `/v1/policy`: the policy document in force and the version the tenant's newest decision named. */
@Controller()
export class PolicyController {
  constructor(
    private readonly reads: RunReadsRepository,
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
  ) {}

  @ApiRoute(API_ROUTES.getPolicy)
  async get(@CurrentPrincipal() principal: Principal): Promise<PolicyInForce> {
    const loaded = await loadPolicyInForce(this.config.CAIRN_POLICY_FILE);
    return { ...loaded, lastDecision: await this.reads.lastPolicyDecision(principal.tenant) };
  }
}
