import type { FastifyInstance } from 'fastify';
import { UNMATCHED_ROUTE } from '../metrics/gateway-metrics.js';
import type { GatewayMetrics } from '../metrics/gateway-metrics.js';

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Counts every answered request by its declared route template (`/v1/runs/:id`, as Fastify matched
 * it), never the raw URL: a request no route matched is `unmatched`, an unusual method `OTHER`, so the
 * label values stay as few as the routes. A hook, not an interceptor: guards' 401/403/429 and the
 * router's 404 are counted too.
 */
export function registerRequestMetrics(fastify: FastifyInstance, metrics: GatewayMetrics): void {
  fastify.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? UNMATCHED_ROUTE;
    const method = METHODS.has(request.method) ? request.method : 'OTHER';
    metrics.apiRequests.inc({ method, route, status: String(reply.statusCode) });
    metrics.apiDuration.observe({ method, route }, reply.elapsedTime / 1000);
    done();
  });
}
