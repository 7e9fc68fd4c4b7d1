import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { JsonLogger } from '@cairn/service-kit';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { DASHBOARD_BASE, DASHBOARD_SECURITY_HEADERS, loadDashboardAssets, resolveDashboardAsset } from './dashboard-assets.js';
import type { DashboardAsset } from './dashboard-assets.js';

/** The dashboard's build output: CAIRN_DASHBOARD_DIR, or the `dist/` of the `@cairn/dashboard` workspace. */
export function dashboardDir(configured: string | undefined): string | null {
  if (configured !== undefined) return configured;
  try {
    return join(dirname(fileURLToPath(import.meta.resolve('@cairn/dashboard/package.json'))), 'dist');
  } catch {
    return null;
  }
}

function send(reply: FastifyReply, asset: DashboardAsset): FastifyReply {
  return reply
    .headers(DASHBOARD_SECURITY_HEADERS)
    .header('content-type', asset.contentType)
    .header('cache-control', asset.cacheControl)
    .send(asset.body);
}

/**
 * Serves the built dashboard at DASHBOARD_BASE (static files, the SPA's index.html for its own
 * paths) and redirects `/` there. No key is needed to load the page: it holds no data, and asks
 * for a key before it calls the API. When the build is absent the routes are not registered.
 */
export function registerDashboard(fastify: FastifyInstance, dir: string | null, logger: JsonLogger): boolean {
  if (dir === null || !existsSync(join(dir, 'index.html'))) {
    logger.write('info', 'dashboard not built: /dashboard/ is not served (npm run build)', { dir });
    return false;
  }
  const assets = loadDashboardAssets(dir);
  const notFound = { code: 'E_NOT_FOUND', message: 'no such dashboard file' };
  fastify.get('/', (_request, reply) => reply.redirect(DASHBOARD_BASE, 302));
  fastify.get(DASHBOARD_BASE.slice(0, -1), (_request, reply) => reply.redirect(DASHBOARD_BASE, 301));
  fastify.get(`${DASHBOARD_BASE}*`, (request, reply) => {
    const path = request.url.split('?', 1)[0]?.slice(DASHBOARD_BASE.length) ?? '';
    let decoded: string;
    try {
      decoded = decodeURIComponent(path);
    } catch {
      return reply.code(404).send(notFound);
    }
    const asset = resolveDashboardAsset(assets, decoded);
    return asset === null ? reply.code(404).headers(DASHBOARD_SECURITY_HEADERS).send(notFound) : send(reply, asset);
  });
  logger.write('info', 'dashboard served', { path: DASHBOARD_BASE, files: assets.size });
  return true;
}
