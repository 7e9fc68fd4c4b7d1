import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { isCairnError } from '@cairn/contracts';
import { JsonLogger } from '@cairn/service-kit';
import { McpGatewayConfigSchema } from './mcp-gateway.config.js';
import { MCP_GATEWAY_SERVICE, startMcpHttp } from './start-mcp-http.js';
import { serveMcpStdio } from './start-mcp-stdio.js';

// Config fails at boot, naming the variable (never its value). Logs go to stderr in both
// transports: on stdio, stdout carries protocol messages only.
const logger = new JsonLogger(MCP_GATEWAY_SERVICE);
try {
  const config = loadConfig(McpGatewayConfigSchema);
  if (config.CAIRN_MCP_TRANSPORT === 'stdio') {
    await serveMcpStdio(config, logger);
    process.exit(0);
  }
  const server = await startMcpHttp(config, logger);
  logger.write('info', 'listening', { url: server.url, upstream: config.CAIRN_MCP_UPSTREAM_URL, pid: process.pid });
  const stop = (signal: string) => {
    logger.write('info', 'stopping', { signal });
    server.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.write('error', 'failed to stop cleanly', { error: error instanceof Error ? error.message : String(error) });
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
} catch (error) {
  logger.write('fatal', 'failed to start', { code: isCairnError(error) ? error.code : 'E_INTERNAL', error: error instanceof Error ? error.message : String(error) });
  process.exit(1);
}
