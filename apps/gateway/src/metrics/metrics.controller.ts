import { API_ROUTES, CairnError } from '@cairn/contracts';
import { Controller, Inject, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { OPERATOR_TENANT } from '../keys/key-admin.service.js';
import { GATEWAY_METRICS, MetricsSources } from './metrics-sources.service.js';
import type { GatewayMetrics } from './gateway-metrics.js';

/**
 * `/metrics`: the Prometheus text format, for a key with `metrics:read` of the operator's tenant
 * (docs/metrics.md). The series are the deployment's — every tenant's runs, the workers — so another
 * tenant's key is refused even with the scope.
 */
@Controller()
export class MetricsController {
  constructor(
    @Inject(GATEWAY_METRICS) private readonly metrics: GatewayMetrics,
    private readonly sources: MetricsSources,
  ) {}

  @ApiRoute(API_ROUTES.metrics)
  async scrape(@CurrentPrincipal() principal: Principal, @Res() reply: FastifyReply): Promise<void> {
    if (principal.tenant !== OPERATOR_TENANT) throw new CairnError('E_FORBIDDEN', `the deployment's metrics are the operator's: a metrics:read key of tenant ${OPERATOR_TENANT}`);
    await this.sources.refresh();
    const text = await this.metrics.registry.metrics();
    await reply.status(API_ROUTES.metrics.status).header('content-type', this.metrics.registry.contentType).header('cache-control', 'no-store').send(text);
  }
}
