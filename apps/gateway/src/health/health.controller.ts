import { API_ROUTES } from '@cairn/contracts';
import type { Health } from '@cairn/contracts';
import { Controller } from '@nestjs/common';
import { ApiRoute } from '../http/api-route.decorator.js';
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
