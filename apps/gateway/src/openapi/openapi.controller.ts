import { API_ROUTES } from '@cairn/contracts';
import { Controller } from '@nestjs/common';
import { ApiRoute } from '../http/api-route.decorator.js';
import { buildOpenApi } from './openapi.builder.js';
import type { OpenApiDocument } from './openapi.builder.js';

/** `/openapi.json`: public; built once from the contracts and the route table. */
@Controller()
export class OpenApiController {
  private readonly document: OpenApiDocument = buildOpenApi();

  @ApiRoute(API_ROUTES.openApi)
  get(): OpenApiDocument {
    return this.document;
  }
}
