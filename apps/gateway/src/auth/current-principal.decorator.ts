import { CairnError } from '@cairn/contracts';
import { createParamDecorator } from '@nestjs/common';
import type { ExecutionContext } from '@nestjs/common';
import type { Principal } from './api-key.store.js';
import type { AuthenticatedRequest } from './authenticated-request.js';

/** The verified principal of a keyed route; a route reached without one fails closed. */
export const CurrentPrincipal = createParamDecorator((_data: unknown, context: ExecutionContext): Principal => {
  const principal = context.switchToHttp().getRequest<AuthenticatedRequest>().principal;
  if (principal === undefined) throw new CairnError('E_UNAUTHORIZED', 'this route needs an API key');
  return principal;
});
