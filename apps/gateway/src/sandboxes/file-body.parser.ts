import { API_ROUTES, CairnError, SANDBOX_FILE_LIMIT_BYTES } from '@cairn/contracts';
import type { FastifyInstance, preParsingHookHandler, RouteOptions } from 'fastify';

const FILE_ROUTE = API_ROUTES.putSandboxFile;
const OCTET_STREAM = 'application/octet-stream';

function isFileRoute(method: string | readonly string[], url: string | undefined): boolean {
  const methods = typeof method === 'string' ? [method] : method;
  return url === FILE_ROUTE.path && methods.includes(FILE_ROUTE.method);
}

/**
 * A sandbox file's bytes (`PUT /v1/sandboxes/:id/files`) arrive as application/octet-stream and
 * stay bytes. That route alone may carry up to 16 MiB (Fastify enforces it while reading, before
 * any of it is buffered past the limit: 413 E_TOO_LARGE), and only as octet-stream (another type
 * is refused before its body is read); every other route keeps the gateway's own limit, and
 * refuses octet-stream bodies outright. Call before the routes are registered
 * (before `app.listen`/`app.init`): the limit is set as each route is added.
 */
export function registerFileBodyParser(fastify: FastifyInstance, defaultLimitBytes: number): void {
  fastify.addHook('onRoute', (route: RouteOptions) => {
    if (!isFileRoute(route.method, route.url)) return;
    route.bodyLimit = SANDBOX_FILE_LIMIT_BYTES;
    // Any other body is refused before it is read: the 16 MiB are for a file's bytes only.
    const refuseOtherTypes: preParsingHookHandler = (request, _reply, payload, done) => {
      const type = request.headers['content-type'];
      if (type === undefined || type.split(';')[0]?.trim().toLowerCase() === OCTET_STREAM) done(null, payload);
      else done(new CairnError('E_INPUT', `send the file as the request body, with Content-Type: ${OCTET_STREAM}`, { field: 'Content-Type' }));
    };
    const existing = route.preParsing === undefined ? [] : Array.isArray(route.preParsing) ? route.preParsing : [route.preParsing];
    route.preParsing = [...existing, refuseOtherTypes];
  });
  fastify.addContentTypeParser(OCTET_STREAM, { parseAs: 'buffer', bodyLimit: defaultLimitBytes }, (request, body, done) => {
    if (!isFileRoute(request.method, request.routeOptions.url)) {
      done(new CairnError('E_INPUT', `${OCTET_STREAM} is accepted only by ${FILE_ROUTE.method} ${FILE_ROUTE.path}`), undefined);
      return;
    }
    done(null, body);
  });
}
