import { CairnError, HTTP_STATUS_BY_CODE, isCairnError } from '@cairn/contracts';
import type { ErrorBody, ErrorCode } from '@cairn/contracts';
import { HttpException } from '@nestjs/common';

/** What the edge answers for an error: the status `HTTP_STATUS_BY_CODE` gives its code, and the body. */
export interface ErrorResponse {
  status: number;
  body: ErrorBody;
  /** Not a refusal the client caused: the filter logs it. */
  serverFault: boolean;
}

/** The status of a code: one `Record<ErrorCode, number>`, so a new code fails the type check there. */
export function httpStatusOf(code: ErrorCode): number {
  return HTTP_STATUS_BY_CODE[code];
}

/**
 * The code for a status that Nest or Fastify produced on their own (an unknown route, a body
 * over the limit, a media type nobody parses). The answer then carries the code's own status,
 * so every response of the gateway is one of the contract's.
 */
export function codeForHttpStatus(status: number): ErrorCode {
  switch (status) {
    case 401:
      return 'E_UNAUTHORIZED';
    case 403:
      return 'E_FORBIDDEN';
    case 404:
    case 405:
      return 'E_NOT_FOUND';
    case 409:
      return 'E_CONFLICT';
    case 413:
      return 'E_TOO_LARGE';
    case 429:
      return 'E_RATE_LIMITED';
    case 503:
      return 'E_UNAVAILABLE';
    default:
      return status >= 400 && status < 500 ? 'E_INPUT' : 'E_INTERNAL';
  }
}

function response(error: CairnError): ErrorResponse {
  const status = httpStatusOf(error.code);
  return { status, body: error.toBody(), serverFault: status >= 500 };
}

/** Maps anything a handler, guard, pipe or the framework threw to `{ code, message, details }`. */
export function errorResponseFor(error: unknown): ErrorResponse {
  if (isCairnError(error)) return response(error);
  if (error instanceof HttpException) {
    const code = codeForHttpStatus(error.getStatus());
    // A framework 5xx message may describe internals; a 4xx one describes the request.
    const message = code === 'E_INTERNAL' ? 'internal error' : error.message;
    return response(new CairnError(code, message));
  }
  return { status: httpStatusOf('E_INTERNAL'), body: { code: 'E_INTERNAL', message: 'internal error' }, serverFault: true };
}
