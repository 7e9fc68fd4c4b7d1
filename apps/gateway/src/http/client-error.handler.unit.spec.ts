import { describe, expect, it } from 'vitest';
import { clientErrorResponse } from './client-error.handler.js';

describe('clientErrorResponse', () => {
  it("answers what the HTTP parser refused in the contract's shape, with its code's status", () => {
    expect(clientErrorResponse({ code: 'HPE_INVALID_HEADER_TOKEN' })).toEqual({ status: 400, body: { code: 'E_INPUT', message: 'malformed HTTP request' } });
    expect(clientErrorResponse({})).toEqual({ status: 400, body: { code: 'E_INPUT', message: 'malformed HTTP request' } });
    expect(clientErrorResponse({ code: 'HPE_HEADER_OVERFLOW' })).toEqual({ status: 413, body: { code: 'E_TOO_LARGE', message: 'the request headers are too large' } });
    expect(clientErrorResponse({ code: 'ERR_HTTP_REQUEST_TIMEOUT' })).toMatchObject({ status: 400, body: { code: 'E_INPUT' } });
  });
});
