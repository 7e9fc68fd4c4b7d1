import { ROOT_CONTEXT } from '@opentelemetry/api';
import type { Span } from '@opentelemetry/api';
import { RPCType, setRPCMetadata } from '@opentelemetry/core';
import type { RPCMetadata } from '@opentelemetry/core';
import { describe, expect, it } from 'vitest';
import { nameServerSpan, nameServerSpanHook } from './tracing.js';

/** A server span as the `http` instrumentation leaves it in the request's context, recording what is done to it. */
function servedRequest(): { metadata: RPCMetadata; names: string[]; attributes: Record<string, unknown> } {
  const names: string[] = [];
  const attributes: Record<string, unknown> = {};
  const span = {
    updateName(name: string) {
      names.push(name);
      return span;
    },
    setAttribute(key: string, value: unknown) {
      attributes[key] = value;
      return span;
    },
  } as unknown as Span;
  return { metadata: { type: RPCType.HTTP, span }, names, attributes };
}

describe('server spans named by route', () => {
  it('names the served request `<METHOD> <route template>`, sets http.route and tells the http instrumentation the route', () => {
    const served = servedRequest();
    nameServerSpan(setRPCMetadata(ROOT_CONTEXT, served.metadata), 'GET', '/v1/runs/:id');
    expect(served.names).toEqual(['GET /v1/runs/:id']);
    expect(served.attributes).toEqual({ 'http.route': '/v1/runs/:id' });
    // What the instrumentation reads when the response ends: it keeps this name and sets the same route.
    expect(served.metadata.route).toBe('/v1/runs/:id');
  });

  it('leaves a request no route matched named by its method alone: never the raw URL', () => {
    for (const route of [undefined, '']) {
      const served = servedRequest();
      nameServerSpan(setRPCMetadata(ROOT_CONTEXT, served.metadata), 'GET', route);
      expect(served.names).toEqual([]);
      expect(served.attributes).toEqual({});
      expect(served.metadata.route).toBeUndefined();
    }
  });

  it('does nothing outside a served request', () => {
    expect(() => nameServerSpan(ROOT_CONTEXT, 'POST', '/v1/runs')).not.toThrow();
  });

  it('as a Fastify hook, always lets the request go on (tracing off here: it touches nothing)', () => {
    let calls = 0;
    nameServerSpanHook({ method: 'GET', routeOptions: { url: '/v1/runs/:id' } }, {}, () => (calls += 1));
    nameServerSpanHook({ method: 'GET', routeOptions: {} }, {}, () => (calls += 1));
    expect(calls).toBe(2);
  });
});
