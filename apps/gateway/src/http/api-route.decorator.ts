import type { ApiRoute as ApiRouteSpec } from '@cairn/contracts';
import { applyDecorators, Delete, Get, HttpCode, Post, Put, SetMetadata } from '@nestjs/common';

/** Metadata key of the scope a route needs (null: public). A route without it is refused. */
export const ROUTE_SCOPE = 'cairn:route-scope';

/** Method, path, success status and scope of a handler, all from its entry in `API_ROUTES`. */
export function ApiRoute(route: ApiRouteSpec): MethodDecorator {
  const mapping = { GET: Get, POST: Post, PUT: Put, DELETE: Delete }[route.method](route.path);
  return applyDecorators(mapping, HttpCode(route.status), SetMetadata(ROUTE_SCOPE, route.scope));
}
