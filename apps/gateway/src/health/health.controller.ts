import { Controller } from '@nestjs/common';
import { ApiRoute } from '../http/api-route.decorator.js';
import { API_ROUTES } from '../http/api-routes.js';
import type { Health } from '../http/api.schemas.js';
import { HealthService } from './health.service.js';

/** `/v1/health`: public, always 200; `status` says whether everything answered. */
@Controller()
export class HealthController {
  constructor(private readonly health: HealthService) {}

  @ApiRoute(API_ROUTES.health)
  check(): Promise<Health> {
    return this.health.check();
  }
}
