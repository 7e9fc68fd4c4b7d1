import { randomUUID } from 'node:crypto';
import { isCairnError } from '@cairn/contracts';
import type { ErrorCode } from '@cairn/contracts';
import { JsonLogger, RateLimiter } from '@cairn/service-kit';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { Controller, Delete, Get, Inject, Post, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CairnRestClient } from '../cairn-rest.client.js';
import type { McpGatewayConfig } from '../mcp-gateway.config.js';
import { createMcpServer } from '../mcp-server.factory.js';
import { MCP_CONFIG } from './mcp-http.tokens.js';
import { McpSessions } from './mcp-sessions.js';
import { bearerKey, keyDigest, refuseHostOrOrigin } from './request-checks.js';
import type { OriginPolicy } from './request-checks.js';

export const MCP_PATH = '/mcp';

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** A refusal before the transport: HTTP status plus a JSON-RPC error whose `data.code` is Cairn's. */
function refuse(reply: FastifyReply, status: number, code: ErrorCode, message: string, extraHeaders: Record<string, string> = {}, details?: Record<string, unknown>): void {
  void reply
    .status(status)
    .headers({ 'content-type': 'application/json', ...extraHeaders })
    .send({ jsonrpc: '2.0', error: { code: -32000, message: `${code}: ${message}`, data: { code, ...(details === undefined ? {} : { details }) } }, id: null });
}

/**
 * `/mcp`: the Streamable HTTP transport (POST messages, GET the server's stream, DELETE the
 * session). Every request passes the Host/Origin allowlist and carries the Cairn API key as
 * `Authorization: Bearer`; a session is bound to the key that opened it, and its tools act with it.
 */
@Controller()
export class McpController {
  private readonly policy: OriginPolicy;
  /** Per key, by the key's SHA-256 (this gateway never learns key ids, and keeps no key). */
  private readonly limiter: RateLimiter;

  constructor(
    @Inject(MCP_CONFIG) private readonly config: McpGatewayConfig,
    private readonly sessions: McpSessions,
    private readonly logger: JsonLogger,
  ) {
    this.policy = { allowedHosts: config.CAIRN_MCP_ALLOWED_HOSTS, allowedOrigins: config.CAIRN_MCP_ALLOWED_ORIGINS ?? [] };
    this.limiter = new RateLimiter({ perSecond: config.CAIRN_MCP_RATE_LIMIT_PER_SECOND, burst: config.CAIRN_MCP_RATE_LIMIT_BURST });
  }

  @Get('/health')
  health(@Req() request: FastifyRequest, @Res() reply: FastifyReply): void {
    const refused = refuseHostOrOrigin({ host: header(request, 'host'), origin: header(request, 'origin') }, this.policy);
    if (refused !== null) return refuse(reply, 403, 'E_FORBIDDEN', refused);
    void reply.send({ status: 'ok', sessions: this.sessions.size });
  }

  @Post(MCP_PATH)
  post(@Req() request: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.handle(request, reply);
  }

  @Get(MCP_PATH)
  get(@Req() request: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.handle(request, reply);
  }

  @Delete(MCP_PATH)
  delete(@Req() request: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.handle(request, reply);
  }

  private async handle(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const refused = refuseHostOrOrigin({ host: header(request, 'host'), origin: header(request, 'origin') }, this.policy);
    if (refused !== null) {
      this.logger.write('warn', 'request refused', { reason: 'host_or_origin', host: header(request, 'host') ?? null, origin: header(request, 'origin') ?? null });
      return refuse(reply, 403, 'E_FORBIDDEN', refused);
    }
    const key = bearerKey(header(request, 'authorization'));
    const challenge = { 'www-authenticate': 'Bearer realm="cairn"' };
    if (key === null) return refuse(reply, 401, 'E_UNAUTHORIZED', 'a Cairn API key is required: Authorization: Bearer cairn_…', challenge);
    const digest = keyDigest(key);
    // Charged before anything else is done for the key: a flood costs no key check upstream.
    const decision = this.limiter.take(digest.toString('hex'));
    if (!decision.allowed) {
      const { retryAfterSeconds } = decision;
      return refuse(reply, 429, 'E_RATE_LIMITED', `too many requests with this API key: try again in ${retryAfterSeconds} s`, { 'retry-after': String(retryAfterSeconds) }, { retryAfterSeconds });
    }

    const sessionId = header(request, 'mcp-session-id');
    if (sessionId !== undefined) {
      const transport = this.sessions.use(sessionId, digest);
      // Another key's session is as unknown as one that never was.
      if (transport === null) return refuse(reply, 404, 'E_NOT_FOUND', 'no such MCP session (it ended, or belongs to another key): initialize a new one');
      reply.hijack();
      await transport.handleRequest(request.raw, reply.raw, request.body);
      return;
    }
    if (request.method !== 'POST' || !isInitializeRequest(request.body)) {
      return refuse(reply, 400, 'E_INPUT', 'no Mcp-Session-Id: the first request of a session is initialize');
    }
    if (this.sessions.full) return refuse(reply, 503, 'E_RATE_LIMITED', 'too many open MCP sessions: close one, or try again later', { 'retry-after': '5' });

    const client = new CairnRestClient(this.config.CAIRN_MCP_UPSTREAM_URL, key);
    try {
      await client.checkKey();
    } catch (error) {
      const code = isCairnError(error) ? error.code : 'E_INTERNAL';
      if (code === 'E_UNAUTHORIZED') return refuse(reply, 401, code, 'the Cairn API key is unknown, expired or revoked', challenge);
      // The REST gateway's own limit for this key: passed on as it is, not as an outage.
      const retryAfter = isCairnError(error) ? error.details?.retryAfterSeconds : undefined;
      if (code === 'E_RATE_LIMITED' && typeof retryAfter === 'number') {
        return refuse(reply, 429, code, `too many requests with this API key: try again in ${retryAfter} s`, { 'retry-after': String(retryAfter) }, { retryAfterSeconds: retryAfter });
      }
      this.logger.write('error', 'cannot check an API key', { code, error: error instanceof Error ? error.message : String(error) });
      return refuse(reply, 503, 'E_UNAVAILABLE', 'the Cairn REST gateway cannot check the key right now: try again later');
    }

    const server = createMcpServer(client);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        this.sessions.add(id, { transport, server, keyDigest: digest });
        this.logger.write('info', 'session opened', { session: id, sessions: this.sessions.size });
      },
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) this.sessions.remove(transport.sessionId, 'closed');
    };
    await server.connect(transport);
    reply.hijack();
    await transport.handleRequest(request.raw, reply.raw, request.body);
  }
}
