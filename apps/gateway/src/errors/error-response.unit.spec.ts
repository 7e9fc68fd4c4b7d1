import { CairnError, ERROR_CODES, HTTP_STATUS_BY_CODE } from '@cairn/contracts';
import { BadRequestException, HttpException, NotFoundException, PayloadTooLargeException } from '@nestjs/common';
import { describe, expect, it } from 'vitest';
import { codeForHttpStatus, errorResponseFor, httpStatusOf } from './error-response.js';

describe('errorResponseFor', () => {
  it.each(ERROR_CODES)('answers %s with its contract status and { code, message, details }', (code) => {
    const { status, body, serverFault } = errorResponseFor(new CairnError(code, `a ${code}`, { why: 'test' }));
    expect(status).toBe(HTTP_STATUS_BY_CODE[code]);
    expect(status).toBeGreaterThanOrEqual(400);
    expect(status).toBeLessThan(600);
    expect(body).toEqual({ code, message: `a ${code}`, details: { why: 'test' } });
    expect(serverFault).toBe(status >= 500);
  });

  it('leaves details out when the error has none', () => {
    expect(errorResponseFor(new CairnError('E_NOT_FOUND', 'no run')).body).toEqual({ code: 'E_NOT_FOUND', message: 'no run' });
  });

  it("maps the framework's own refusals to codes, answered with the code's status", () => {
    expect(errorResponseFor(new NotFoundException('Cannot GET /v2'))).toMatchObject({ status: 404, body: { code: 'E_NOT_FOUND' } });
    expect(errorResponseFor(new PayloadTooLargeException('Request body is too large'))).toMatchObject({ status: 413, body: { code: 'E_TOO_LARGE' } });
    expect(errorResponseFor(new BadRequestException('Body is not valid JSON'))).toMatchObject({ status: 400, body: { code: 'E_INPUT' } });
    // Unsupported media type: not a code of its own, so the request is E_INPUT with E_INPUT's status.
    expect(errorResponseFor(new HttpException('Unsupported Media Type', 415))).toMatchObject({ status: 400, body: { code: 'E_INPUT' } });
  });

  it('never shows the message of an unexpected error', () => {
    const response = errorResponseFor(new Error('password authentication failed for user "cairn" at 10.0.0.7'));
    expect(response).toEqual({ status: 500, body: { code: 'E_INTERNAL', message: 'internal error' }, serverFault: true });
    expect(errorResponseFor(new HttpException('pool exhausted at db-7', 502)).body).toEqual({ code: 'E_INTERNAL', message: 'internal error' });
  });

  it('maps statuses the contract names to their codes', () => {
    expect([401, 403, 404, 405, 409, 413, 429, 503, 418, 500, 502].map(codeForHttpStatus)).toEqual([
      'E_UNAUTHORIZED',
      'E_FORBIDDEN',
      'E_NOT_FOUND',
      'E_NOT_FOUND',
      'E_CONFLICT',
      'E_TOO_LARGE',
      'E_RATE_LIMITED',
      'E_UNAVAILABLE',
      'E_INPUT',
      'E_INTERNAL',
      'E_INTERNAL',
    ]);
    for (const code of ERROR_CODES) expect(httpStatusOf(code)).toBe(HTTP_STATUS_BY_CODE[code]);
  });
});
