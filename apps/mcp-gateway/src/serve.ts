import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { exitOnSignals, exitOnStartFailure, JsonLogger } from '@cairn/service-kit';
import { exitWithTraces } from '@cairn/tracing';
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
    await exitWithTraces(0);
  }
  const server = await startMcpHttp(config, logger);
  logger.write('info', 'listening', { url: server.url, upstream: config.CAIRN_MCP_UPSTREAM_URL, pid: process.pid });
  exitOnSignals(logger, () => server.close());
} catch (error) {
  await exitOnStartFailure(logger, error);
}
