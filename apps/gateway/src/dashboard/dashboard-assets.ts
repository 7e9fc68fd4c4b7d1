import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';

/*
 * The admin dashboard's built files (apps/dashboard/dist), read once into memory and served
 * under DASHBOARD_BASE. Pure helpers here; the Fastify wiring is in dashboard.routes.ts.
 */

/** Where the dashboard is served; the Vite build uses the same `base`. */
export const DASHBOARD_BASE = '/dashboard/';

/**
 * No inline script or style, nothing from elsewhere, no framing: the page talks only to this
 * gateway (`connect-src 'self'`), so a key typed into it can go nowhere else.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers every dashboard response carries. */
export const DASHBOARD_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': DASHBOARD_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
};

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

export function contentTypeFor(path: string): string {
  return CONTENT_TYPES[extname(path).toLowerCase()] ?? 'application/octet-stream';
}

/** Vite names built assets `<name>-<8+ char hash>.<ext>` under assets/: their bytes never change. */
const HASHED_ASSET = /^assets\/[^/]+-[A-Za-z0-9_-]{8,}\.[a-z0-9]+$/;

export function cacheControlFor(relativePath: string): string {
  return HASHED_ASSET.test(relativePath) ? 'public, max-age=31536000, immutable' : 'no-cache';
}

export interface DashboardAsset {
  body: Buffer;
  contentType: string;
  cacheControl: string;
}

/** Every file under `dir`, keyed by its path relative to it with `/` separators. */
export function loadDashboardAssets(dir: string): Map<string, DashboardAsset> {
  const assets = new Map<string, DashboardAsset>();
  const walk = (current: string) => {
    for (const name of readdirSync(current)) {
      const path = join(current, name);
      const stat = statSync(path);
      if (stat.isDirectory()) walk(path);
      else if (stat.isFile()) {
        const key = relative(dir, path).split(sep).join('/');
        assets.set(key, { body: readFileSync(path), contentType: contentTypeFor(key), cacheControl: cacheControlFor(key) });
      }
    }
  };
  walk(dir);
  return assets;
}

/**
 * The asset a request path under DASHBOARD_BASE names. Files are looked up in the map, never
 * on disk, so no path can reach outside the build. A path that is not a file and does not look
 * like one (no extension) is a page of the single-page app: index.html answers it. A missing
 * file with an extension is null (a 404, not an HTML page the browser would misread as code).
 */
export function resolveDashboardAsset(assets: ReadonlyMap<string, DashboardAsset>, pathUnderBase: string): DashboardAsset | null {
  const path = pathUnderBase.replace(/^\/+/, '');
  const asset = assets.get(path);
  if (asset !== undefined) return asset;
  const last = path.split('/').at(-1) ?? '';
  if (path.startsWith('assets/') || extname(last) !== '') return null;
  return assets.get('index.html') ?? null;
}
