import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cacheControlFor, contentTypeFor, DASHBOARD_CSP, loadDashboardAssets, resolveDashboardAsset } from './dashboard-assets.js';
import type { DashboardAsset } from './dashboard-assets.js';

let dir: string;
let assets: Map<string, DashboardAsset>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-dashboard-assets-'));
  await mkdir(join(dir, 'assets'));
  await writeFile(join(dir, 'index.html'), '<!doctype html><script type="module" src="/dashboard/assets/index-DboqeeRG.js"></script>');
  await writeFile(join(dir, 'assets', 'index-DboqeeRG.js'), 'export {};');
  await writeFile(join(dir, 'assets', 'index-BsL9tOTJ.css'), 'body{}');
  await writeFile(join(dir, 'robots.txt'), 'User-agent: *\nDisallow: /\n');
  assets = loadDashboardAssets(dir);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('dashboard assets', () => {
  it('loads every file of the build, keyed by its path under the build', () => {
    expect([...assets.keys()].sort()).toEqual(['assets/index-BsL9tOTJ.css', 'assets/index-DboqeeRG.js', 'index.html', 'robots.txt']);
  });

  it('names each content type, and caches only hashed assets for good', () => {
    expect(contentTypeFor('index.html')).toBe('text/html; charset=utf-8');
    expect(contentTypeFor('assets/index-DboqeeRG.js')).toBe('text/javascript; charset=utf-8');
    expect(contentTypeFor('assets/index-BsL9tOTJ.css')).toBe('text/css; charset=utf-8');
    expect(contentTypeFor('x.unknown')).toBe('application/octet-stream');
    expect(cacheControlFor('assets/index-DboqeeRG.js')).toBe('public, max-age=31536000, immutable');
    expect(cacheControlFor('index.html')).toBe('no-cache');
    expect(cacheControlFor('robots.txt')).toBe('no-cache');
    expect(cacheControlFor('assets/logo.svg')).toBe('no-cache');
  });

  it("answers the SPA's own paths with index.html, and a missing file with nothing", () => {
    const index = assets.get('index.html');
    expect(resolveDashboardAsset(assets, '')).toBe(index);
    expect(resolveDashboardAsset(assets, 'runs/run_abc')).toBe(index);
    expect(resolveDashboardAsset(assets, 'approvals')).toBe(index);
    expect(resolveDashboardAsset(assets, 'assets/index-DboqeeRG.js')?.contentType).toBe('text/javascript; charset=utf-8');
    expect(resolveDashboardAsset(assets, 'assets/gone-12345678.js')).toBeNull();
    expect(resolveDashboardAsset(assets, 'favicon.ico')).toBeNull();
  });

  it('never reaches outside the build, whatever the path says', () => {
    for (const path of ['../package.json', '../../../etc/passwd', 'assets/../../secret.txt', '/etc/passwd.txt', '..%2f..%2fetc%2fpasswd.js']) {
      const asset = resolveDashboardAsset(assets, path);
      expect(asset === null || asset === assets.get('index.html')).toBe(true);
    }
  });

  it('allows scripts and styles from this origin only: no inline code, no framing', () => {
    expect(DASHBOARD_CSP).toContain("script-src 'self'");
    expect(DASHBOARD_CSP).toContain("style-src 'self'");
    expect(DASHBOARD_CSP).toContain("connect-src 'self'");
    expect(DASHBOARD_CSP).toContain("frame-ancestors 'none'");
    expect(DASHBOARD_CSP).not.toContain('unsafe-inline');
    expect(DASHBOARD_CSP).not.toContain('unsafe-eval');
  });
});
