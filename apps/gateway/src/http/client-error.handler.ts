import { STATUS_CODES } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { HTTP_STATUS_BY_CODE } from '@cairn/contracts';
import type { ErrorBody } from '@cairn/contracts';

/**
 * What the gateway answers to a request Node's HTTP parser refused before any route saw it (a
 * control character in a header, a malformed request line, headers too large, a request that
 * never finished arriving). Fastify's own answer is `{ error, message, statusCode }`; this keeps
 * every response of the gateway in the contract's `{ code, message }` shape with its code's status.
 */
export function clientErrorResponse(error: { code?: string }): { status: number; body: ErrorBody } {
  const body: ErrorBody =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? { code: 'E_TOO_LARGE', message: 'the request headers are too large' }
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? { code: 'E_INPUT', message: 'the request did not arrive in time' }
        : { code: 'E_INPUT', message: 'malformed HTTP request' };
  return { status: HTTP_STATUS_BY_CODE[body.code], body };
}

/** Fastify's `clientErrorHandler`: answers once with the contract's shape, then closes the socket. */
export function handleClientError(error: Error & { code?: string }, socket: Socket): void {
  // A reset socket is gone already; there is no one to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  if (socket.writable) {
    const { status, body } = clientErrorResponse(error);
    const text = JSON.stringify(body);
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
    );
  }
  socket.destroy(error);
}

/**
 * The router's `onBadUrl`: a path whose percent-encoding does not decode (`/v1/runs/%E0%A4%A`)
 * is 400 E_INPUT in the contract's shape, not Fastify's own `{ statusCode, error }` body.
 */
export function handleBadUrl(_path: string, _request: IncomingMessage, response: ServerResponse): void {
  const body: ErrorBody = { code: 'E_INPUT', message: 'the request path is not valid percent-encoded UTF-8' };
  const text = JSON.stringify(body);
  response.writeHead(HTTP_STATUS_BY_CODE[body.code], { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}
