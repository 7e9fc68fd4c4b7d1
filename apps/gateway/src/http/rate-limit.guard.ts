import { CairnError } from '@cairn/contracts';
import { RateLimiter } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { CanActivate, ExecutionContext } from '@nestjs/common';
import type { AuthenticatedRequest } from '../auth/authenticated-request.js';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG } from '../gateway.tokens.js';

/**
 * Every keyed request takes a token of its key's bucket (CAIRN_GATEWAY_RATE_LIMIT_PER_SECOND,
 * _BURST); an empty bucket is 429 E_RATE_LIMITED with `Retry-After` (the error filter adds the
 * header from `details.retryAfterSeconds`). Runs after ApiKeyGuard, so only a verified key is
 * counted, by its id: one key's flood leaves every other key's budget whole. Public routes pass.
 */
@Injectable()
export class RateLimitGuard implements CanActivate {
  private readonly limiter: RateLimiter;

  constructor(@Inject(GATEWAY_CONFIG) config: GatewayConfig) {
    this.limiter = new RateLimiter({ perSecond: config.CAIRN_GATEWAY_RATE_LIMIT_PER_SECOND, burst: config.CAIRN_GATEWAY_RATE_LIMIT_BURST });
  }

  canActivate(context: ExecutionContext): boolean {
    const principal = context.switchToHttp().getRequest<AuthenticatedRequest>().principal;
    if (principal === undefined) return true;
    const decision = this.limiter.take(principal.keyId);
    if (decision.allowed) return true;
    throw new CairnError('E_RATE_LIMITED', `too many requests with this API key: try again in ${decision.retryAfterSeconds} s`, {
      retryAfterSeconds: decision.retryAfterSeconds,
    });
  }
}
