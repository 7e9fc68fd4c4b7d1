import { readFileSync } from 'node:fs';
import { API_ROUTES, ERROR_CODES } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { buildOpenApi, openApiPath, renderOpenApi } from './openapi.builder.js';

const COMMITTED = new URL('../../openapi.json', import.meta.url);
const HOW_TO_FIX = 'run `npm run openapi -w @cairn/gateway` and commit apps/gateway/openapi.json';

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { operationId: string; security: unknown[]; responses: Record<string, unknown> }>>;
  components: { schemas: Record<string, unknown> };
};

describe('the OpenAPI document', () => {
  it('committed as apps/gateway/openapi.json is what the contracts and routes generate now', () => {
    let text: string | null = null;
    try {
      text = readFileSync(COMMITTED, 'utf8');
    } catch {
      expect.fail(`apps/gateway/openapi.json is missing: ${HOW_TO_FIX}`);
    }
    if (text !== renderOpenApi()) expect.fail(`apps/gateway/openapi.json is stale: ${HOW_TO_FIX}`);
  });

  it('is OpenAPI 3.1 with every route of the table, keyed routes needing the key', () => {
    const doc = buildOpenApi() as Doc;
    expect(doc.openapi).toBe('3.1.0');
    for (const route of Object.values(API_ROUTES)) {
      const operation = doc.paths[openApiPath(route.path)]?.[route.method.toLowerCase()];
      expect(operation?.operationId, `${route.method} ${route.path}`).toBe(route.operationId);
      expect(operation?.security).toEqual(route.scope === null ? [] : [{ apiKey: [] }]);
      expect(Object.keys(operation?.responses ?? {})).toContain(String(route.status));
    }
    expect(Object.keys(doc.paths).sort()).toEqual(
      [
        '/.well-known/cairn/keys',
        '/metrics',
        '/openapi.json',
        '/v1/health',
        '/v1/images/builds',
        '/v1/keys',
        '/v1/keys/{id}/revoke',
        '/v1/keys/{id}/rotate',
        '/v1/missions/harbor',
        '/v1/policy',
        '/v1/runs',
        '/v1/runs/{id}',
        '/v1/runs/{id}/approvals',
        '/v1/runs/{id}/artifacts',
        '/v1/runs/{id}/artifacts/{path}',
        '/v1/runs/{id}/bundle',
        '/v1/runs/{id}/cancel',
        '/v1/runs/{id}/events',
        '/v1/runs/{id}/events/stream',
        '/v1/runs/{id}/regrade',
        '/v1/runs/{id}/steps/{index}/{stream}',
        '/v1/sandboxes',
        '/v1/sandboxes/{id}',
        '/v1/sandboxes/{id}/bundle',
        '/v1/sandboxes/{id}/events',
        '/v1/sandboxes/{id}/events/stream',
        '/v1/sandboxes/{id}/exec',
        '/v1/sandboxes/{id}/execs/{execId}/{stream}',
        '/v1/sandboxes/{id}/files',
        '/v1/secrets',
        '/v1/secrets/{name}',
        '/v1/secrets/{name}/grants',
        '/v1/secrets/{name}/grants/{grantee}',
        '/v1/tenants',
        '/v1/tenants/{id}',
        '/v1/tenants/{id}/bundle',
        '/v1/tenants/{id}/events',
        '/v1/tlog/checkpoint',
        '/v1/tlog/proof/consistency',
        '/v1/tlog/proof/inclusion',
        '/v1/webhooks',
        '/v1/webhooks/{id}',
        '/v1/webhooks/{id}/deliveries',
        '/v1/webhooks/{id}/deliveries/{deliveryId}/replay',
        '/v1/workers',
        '/v1/workers/{id}/drain',
      ],
    );
  });

  it('takes a secret’s value as text/plain, and answers the secret routes without a value field', () => {
    const doc = buildOpenApi() as Doc;
    const put = (doc.paths['/v1/secrets/{name}'] as unknown as Record<string, { requestBody?: { content: Record<string, unknown> }; 'x-cairn-scope'?: unknown }>).put;
    expect(Object.keys(put?.requestBody?.content ?? {})).toEqual(['text/plain']);
    expect(put?.['x-cairn-scope']).toBe('secrets:write');
    for (const name of ['SecretStored', 'SecretList', 'SecretDeleted', 'SecretGrants']) expect(JSON.stringify(doc.components.schemas[name])).not.toMatch(/"value"/);
  });

  it('takes a sandbox file as octet-stream and answers it as octet-stream; exec answers JSON or NDJSON; writes and file reads need runs:write', () => {
    const doc = buildOpenApi() as Doc;
    type Op = { requestBody?: { content: Record<string, unknown> }; responses: Record<string, { content?: Record<string, unknown> }>; 'x-cairn-scope'?: unknown };
    const files = doc.paths['/v1/sandboxes/{id}/files'] as unknown as Record<string, Op>;
    expect(Object.keys(files.put?.requestBody?.content ?? {})).toEqual(['application/octet-stream']);
    expect(Object.keys(files.get?.responses['200']?.content ?? {})).toEqual(['application/octet-stream']);
    const exec = (doc.paths['/v1/sandboxes/{id}/exec'] as unknown as Record<string, Op>).post;
    expect(Object.keys(exec?.responses['200']?.content ?? {}).sort()).toEqual(['application/json', 'application/x-ndjson']);
    const scopes = Object.values(API_ROUTES)
      .filter((route) => route.path.startsWith('/v1/sandboxes') && route.operationId !== 'getSandboxFile')
      .map((route) => [route.method, route.scope]);
    for (const [method, scope] of scopes) expect(scope).toBe(method === 'GET' ? 'runs:read' : 'runs:write');
    // A file's bytes may carry what the sandbox was given: reading them is not a runs:read affair.
    expect(files.get?.['x-cairn-scope']).toBe('runs:write');
  });

  it('says every keyed route may answer 429 E_RATE_LIMITED with Retry-After, and public ones never', () => {
    const doc = buildOpenApi() as unknown as { paths: Record<string, Record<string, { responses: Record<string, { description: string; headers?: Record<string, unknown> }> }>> };
    for (const route of Object.values(API_ROUTES)) {
      const limited = doc.paths[openApiPath(route.path)]?.[route.method.toLowerCase()]?.responses['429'];
      if (route.scope === null) expect(limited, route.operationId).toBeUndefined();
      else expect(limited, route.operationId).toMatchObject({ description: expect.stringContaining('E_RATE_LIMITED') as string, headers: { 'Retry-After': expect.anything() as unknown } });
    }
  });

  it('resolves every reference inside the document', () => {
    const doc = buildOpenApi() as Doc;
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(10);
    for (const ref of refs) expect(doc.components.schemas, ref).toHaveProperty([ref]);
    expect(JSON.stringify(doc)).not.toContain('__shared');
    expect(JSON.stringify(doc)).not.toContain('"$schema"');
  });

  it('generates the schemas from the contracts: the RunSpec refuses unknown fields, the error codes are the closed union', () => {
    const doc = buildOpenApi() as Doc;
    expect(doc.components.schemas.RunSpec).toMatchObject({ additionalProperties: false, required: ['name', 'steps'] });
    expect(doc.components.schemas.Error).toMatchObject({ properties: { code: { enum: [...ERROR_CODES] } } });
  });

  it('renders stably: sorted keys, trailing newline', () => {
    const text = renderOpenApi();
    expect(text).toBe(renderOpenApi());
    expect(text.endsWith('}\n')).toBe(true);
    const parsed = JSON.parse(text) as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual(Object.keys(parsed).sort());
  });

  it('writes paths the OpenAPI way', () => {
    expect(openApiPath('/v1/runs/:id/events/stream')).toBe('/v1/runs/{id}/events/stream');
    expect(openApiPath('/v1/runs')).toBe('/v1/runs');
    expect(openApiPath('/v1/runs/:id/artifacts/*')).toBe('/v1/runs/{id}/artifacts/{path}');
  });

  it('declares every path parameter a route names, and serves outputs as bytes with their sha256 and read-only scopes', () => {
    const doc = buildOpenApi() as unknown as { paths: Record<string, Record<string, { parameters?: { name: string; in: string }[]; responses: Record<string, { content?: Record<string, unknown>; headers?: Record<string, unknown> }>; 'x-cairn-scope'?: unknown }>> };
    for (const route of Object.values(API_ROUTES)) {
      const path = openApiPath(route.path);
      const named = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      const declared = (doc.paths[path]?.[route.method.toLowerCase()]?.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name);
      expect(declared.sort(), route.operationId).toEqual(named.sort());
    }
    for (const path of ['/v1/runs/{id}/steps/{index}/{stream}', '/v1/runs/{id}/artifacts/{path}', '/v1/sandboxes/{id}/execs/{execId}/{stream}']) {
      const get = doc.paths[path]?.get;
      expect(get?.['x-cairn-scope'], path).toBe('runs:read');
      expect(Object.keys(get?.responses['200']?.content ?? {}), path).toContain('application/octet-stream');
      expect(Object.keys(get?.responses['200']?.headers ?? {}), path).toContain('X-Cairn-Sha256');
      expect(Object.keys(get?.responses ?? {}), path).toEqual(expect.arrayContaining(['404', '413', '500']));
    }
  });
});
