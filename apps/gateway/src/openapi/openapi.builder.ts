import { API_COMPONENTS, API_ROUTES, HTTP_STATUS_BY_CODE } from '@cairn/contracts';
import type { ApiRoute, ErrorCode } from '@cairn/contracts';
import { z } from 'zod';

/*
 * The OpenAPI 3.1 document, generated from the contracts' zod schemas (`z.toJSONSchema`) and the
 * route table the controllers are declared from. Pure: the same input gives the same bytes, so
 * the committed apps/gateway/openapi.json is diff-checked (openapi.builder.unit.spec.ts).
 */

export type OpenApiDocument = Record<string, unknown>;

const SCHEMA_REF = '#/components/schemas/';
const SHARED = '__shared';
const JSON_SCHEMA = { target: 'draft-2020-12' } as const;

/** Every key order fixed, so the rendering does not depend on declaration order. */
function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (typeof value !== 'object' || value === null) return value;
  const sorted: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) sorted[key] = sortKeys((value as Record<string, unknown>)[key]);
  return sorted;
}

/** Rewrites zod's `__shared#/$defs/x` references (recursive types such as JSON values) to components of their own. */
function relinkShared(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(relinkShared);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    if (key === '$ref' && typeof inner === 'string' && inner.startsWith(`${SCHEMA_REF}${SHARED}#/$defs/`)) {
      out[key] = `${SCHEMA_REF}Shared.${inner.slice(`${SCHEMA_REF}${SHARED}#/$defs/`.length)}`;
    } else {
      out[key] = relinkShared(inner);
    }
  }
  return out;
}

function withoutMeta(schema: unknown): Record<string, unknown> {
  const { $schema: _schema, $id: _id, ...rest } = schema as Record<string, unknown>;
  return rest;
}

function componentSchemas(): Record<string, unknown> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(API_COMPONENTS)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, { ...JSON_SCHEMA, uri: (id) => `${SCHEMA_REF}${id}` });
  const out: Record<string, unknown> = {};
  for (const [id, schema] of Object.entries(schemas)) {
    if (id === SHARED) {
      const defs = (schema as { $defs?: Record<string, unknown> }).$defs ?? {};
      for (const [name, def] of Object.entries(defs)) out[`Shared.${name}`] = relinkShared(def);
    } else {
      out[id] = relinkShared(withoutMeta(schema));
    }
  }
  return out;
}

function inlineSchema(schema: z.ZodType): Record<string, unknown> {
  return withoutMeta(z.toJSONSchema(schema, { ...JSON_SCHEMA, io: 'input' }));
}

function parameters(route: ApiRoute): unknown[] {
  const out: unknown[] = [];
  for (const [name, schema] of Object.entries(route.pathParams ?? {})) out.push({ name, in: 'path', required: true, schema: inlineSchema(schema) });
  for (const [name, schema] of Object.entries(route.query?.shape ?? {})) {
    const field = schema as z.ZodType;
    out.push({ name, in: 'query', required: !field.safeParse(undefined).success, schema: inlineSchema(field) });
  }
  for (const [name, header] of Object.entries(route.headers ?? {})) {
    out.push({ name, in: 'header', required: header.required, description: header.description, schema: inlineSchema(header.schema) });
  }
  return out;
}

function ref(component: string): { $ref: string } {
  return { $ref: `${SCHEMA_REF}${component}` };
}

function successResponse(route: ApiRoute): Record<string, unknown> {
  const headers = Object.fromEntries(Object.entries(route.responseHeaders ?? {}).map(([name, description]) => [name, { description, schema: { type: 'string' } }]));
  const base = Object.keys(headers).length > 0 ? { headers } : {};
  switch (route.response) {
    case 'sse':
      return {
        ...base,
        description: 'text/event-stream: each event is `id: <run id>:<seq>`, `event: receipt`, `data: <Receipt JSON>`; comments are heartbeats.',
        content: { 'text/event-stream': { schema: { type: 'string' } } },
      };
    case 'openapi':
      return { ...base, description: 'The OpenAPI 3.1 document of this API.', content: { 'application/json': { schema: { type: 'object' } } } };
    case 'bytes': {
      const types = route.bytes ?? ['application/octet-stream'];
      const content = Object.fromEntries(types.map((type) => [type, { schema: { type: 'string', contentMediaType: type.split(';')[0] } }]));
      return { ...base, description: 'The raw bytes.', content };
    }
    default: {
      const content: Record<string, unknown> = { 'application/json': { schema: ref(route.response) } };
      // Asked for with `Accept: application/x-ndjson`: one JSON object per line, as they happen.
      if (route.ndjson !== undefined) content['application/x-ndjson'] = { schema: ref(route.ndjson) };
      return { ...base, description: route.summary, content };
    }
  }
}

const RETRY_AFTER = {
  description: "Seconds until this key's token bucket holds a request again (CAIRN_GATEWAY_RATE_LIMIT_PER_SECOND, _BURST), or (E_CAPACITY) until trying again is worth it.",
  schema: { type: 'integer', minimum: 1 },
};

/** Error codes grouped under the status each answers with. */
function errorResponses(route: ApiRoute): Record<string, unknown> {
  // A keyed route may also be refused by its key's rate limit (429 with Retry-After).
  const codes: ErrorCode[] = [...route.errors, ...(route.scope === null ? [] : (['E_UNAUTHORIZED', 'E_FORBIDDEN', 'E_RATE_LIMITED'] as const)), 'E_INTERNAL'];
  const byStatus = new Map<number, Set<ErrorCode>>();
  for (const code of codes) {
    const status = HTTP_STATUS_BY_CODE[code];
    byStatus.set(status, (byStatus.get(status) ?? new Set()).add(code));
  }
  return Object.fromEntries(
    [...byStatus].map(([status, set]) => [
      String(status),
      {
        description: [...set].sort().join(', '),
        ...((set.has('E_RATE_LIMITED') && route.scope !== null) || set.has('E_CAPACITY') ? { headers: { 'Retry-After': RETRY_AFTER } } : {}),
        content: { 'application/json': { schema: ref('Error') } },
      },
    ]),
  );
}

function operation(route: ApiRoute): Record<string, unknown> {
  const params = parameters(route);
  return {
    operationId: route.operationId,
    summary: route.summary,
    security: route.scope === null ? [] : [{ apiKey: [] }],
    'x-cairn-scope': route.scope,
    ...(params.length > 0 ? { parameters: params } : {}),
    ...(route.requestBody === undefined
      ? {}
      : { requestBody: { required: route.requestBody.required, content: { [route.requestBody.contentType ?? 'application/json']: { schema: ref(route.requestBody.component) } } } }),
    responses: { [String(route.status)]: successResponse(route), ...errorResponses(route) },
  };
}

/** `/v1/runs/:id` → `/v1/runs/{id}`; a trailing wildcard (`…/artifacts/*`) is the `{path}` parameter. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}').replace(/\/\*$/, '/{path}');
}

export function buildOpenApi(): OpenApiDocument {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of Object.values(API_ROUTES) as ApiRoute[]) {
    const path = openApiPath(route.path);
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation(route) };
  }
  return sortKeys({
    openapi: '3.1.0',
    info: {
      title: 'Cairn REST API',
      version: '1',
      description:
        'Submit runs, read them as projected from their evidence chains, follow their receipts, export proof bundles. Errors are { code, message, details } with the status of their code. Receipts are snake_case exactly as stored; everything else is camelCase.',
    },
    servers: [{ url: 'http://127.0.0.1:7410' }],
    security: [{ apiKey: [] }],
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key, cairn_<8-char prefix>_<secret>, sent as Authorization: Bearer <key>.' },
      },
      schemas: componentSchemas(),
    },
  }) as OpenApiDocument;
}

/** The exact text of apps/gateway/openapi.json. */
export function renderOpenApi(): string {
  return `${JSON.stringify(buildOpenApi(), null, 2)}\n`;
}
