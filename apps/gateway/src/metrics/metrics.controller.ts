import { API_ROUTES } from '@cairn/contracts';
import { Controller, Inject, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { ApiRoute } from '../http/api-route.decorator.js';
import { GATEWAY_METRICS, MetricsSources } from './metrics-sources.service.js';
import type { GatewayMetrics } from './gateway-metrics.js';

/** `/metrics`: the Prometheus text format, for a key with `metrics:read` (docs/metrics.md). */
@Controller()
export class MetricsController {
  constructor(
    @Inject(GATEWAY_METRICS) private readonly metrics: GatewayMetrics,
    private readonly sources: MetricsSources,
  ) {}

  @ApiRoute(API_ROUTES.metrics)
  async scrape(@Res() reply: FastifyReply): Promise<void> {
    await this.sources.refresh();
    const text = await this.metrics.registry.metrics();
    await reply.status(API_ROUTES.metrics.status).header('content-type', this.metrics.registry.contentType).header('cache-control', 'no-store').send(text);
  }
}
