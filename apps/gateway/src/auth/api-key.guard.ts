import { CairnError, hasScope } from '@cairn/contracts';
import type { ApiKeyScope } from '@cairn/contracts';
import { Injectable } from '@nestjs/common';
import type { CanActivate, ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ROUTE_SCOPE } from '../http/api-route.decorator.js';
import { bearerToken } from './api-key.codec.js';
import { ApiKeyRepository } from './api-key.repository.js';
import type { AuthenticatedRequest } from './authenticated-request.js';

/**
 * Every route: public ones (scope null) pass; keyed ones need a valid key (401) holding the
 * route's scope (403). A route that declares nothing is refused: fail closed.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly keys: ApiKeyRepository,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const scope = this.reflector.get<ApiKeyScope | null | undefined>(ROUTE_SCOPE, context.getHandler());
    if (scope === undefined) throw new CairnError('E_INTERNAL', 'this route declares no scope');
    if (scope === null) return true;
    const request = context.switchToHttp().getRequest<AuthenticatedRequest>();
    const principal = await this.keys.authenticate(bearerToken(request.headers.authorization));
    if (!hasScope(principal.scopes, scope)) throw new CairnError('E_FORBIDDEN', `this API key lacks the ${scope} scope`, { scope });
    request.principal = principal;
    return true;
  }
}
