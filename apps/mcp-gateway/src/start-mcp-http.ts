import type { AddressInfo } from 'node:net';
import { JsonLogger } from '@cairn/service-kit';
import { nameServerSpanHook } from '@cairn/tracing';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { MCP_PATH } from './http/mcp.controller.js';
import { McpHttpModule } from './http/mcp-http.module.js';
import { McpSessions } from './http/mcp-sessions.js';
import { MCP_BODY_LIMIT_BYTES } from './mcp-gateway.config.js';
import type { McpGatewayConfig } from './mcp-gateway.config.js';

export const MCP_GATEWAY_SERVICE = 'mcp-gateway';

export interface RunningMcpHttp {
  /** `http://<host>:<port>/mcp`: the Streamable HTTP endpoint. */
  readonly url: string;
  readonly port: number;
  /** Closes every session, then the server. Idempotent. */
  close(): Promise<void>;
}

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** Serves MCP over Streamable HTTP on CAIRN_MCP_HOST:CAIRN_MCP_PORT (127.0.0.1 unless told otherwise). */
export async function startMcpHttp(config: McpGatewayConfig, logger: JsonLogger): Promise<RunningMcpHttp> {
  const sessions = new McpSessions(config.CAIRN_MCP_MAX_SESSIONS, config.CAIRN_MCP_SESSION_IDLE_MS, (session, why) =>
    logger.write('info', 'session closed', { session, why }),
  );
  const adapter = new FastifyAdapter({ bodyLimit: MCP_BODY_LIMIT_BYTES, logger: false });
  const app = await NestFactory.create<NestFastifyApplication>(McpHttpModule.forRoot({ config, sessions, logger }), adapter, {
    logger: new JsonLogger(MCP_GATEWAY_SERVICE, 'warn'),
    abortOnError: false,
  });
  // Before the routes are registered (at listen): the request's server span is named `POST /mcp`.
  app.getHttpAdapter().getInstance().addHook('onRequest', nameServerSpanHook);
  try {
    await app.listen(config.CAIRN_MCP_PORT, config.CAIRN_MCP_HOST);
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  const address = app.getHttpAdapter().getInstance().server.address() as AddressInfo | null;
  const port = address?.port ?? config.CAIRN_MCP_PORT;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${hostForUrl(config.CAIRN_MCP_HOST)}:${port}${MCP_PATH}`,
    port,
    close: () =>
      (closing ??= (async () => {
        await sessions.closeAll();
        await app.close();
      })()),
  };
}
