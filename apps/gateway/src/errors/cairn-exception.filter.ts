import { isCairnError } from '@cairn/contracts';
import { JsonLogger } from '@cairn/service-kit';
import { Catch } from '@nestjs/common';
import type { ArgumentsHost, ExceptionFilter } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorResponseFor } from './error-response.js';

/**
 * The one place errors become HTTP: services throw `CairnError`s (never HTTP exceptions), and
 * this filter answers each with its code's status and `{ code, message, details }`.
 */
@Catch()
export class CairnExceptionFilter implements ExceptionFilter {
  constructor(private readonly logger: JsonLogger) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const reply = http.getResponse<FastifyReply>();
    const request = http.getRequest<FastifyRequest>();
    const { status, body, serverFault } = errorResponseFor(exception);
    if (serverFault) {
      // Method and route only: never headers (the API key) or bodies.
      this.logger.write('error', 'request failed', {
        method: request.method,
        route: request.routeOptions.url ?? null,
        code: body.code,
        error: isCairnError(exception) ? exception.message : exception instanceof Error ? `${exception.name}: ${exception.message}` : String(exception),
      });
    }
    // A stream already under way (SSE) cannot take a status any more: end it.
    if (reply.sent || reply.raw.headersSent) {
      if (!reply.raw.writableEnded) reply.raw.end();
      return;
    }
    // A rate limit and a full fleet say when to come back (RFC 9110 §10.2.3), in whole seconds.
    const retryAfter = body.code === 'E_RATE_LIMITED' || body.code === 'E_CAPACITY' ? body.details?.retryAfterSeconds : undefined;
    if (typeof retryAfter === 'number' && Number.isInteger(retryAfter) && retryAfter > 0) void reply.header('retry-after', String(retryAfter));
    void reply.status(status).header('content-type', 'application/json; charset=utf-8').send(body);
  }
}
