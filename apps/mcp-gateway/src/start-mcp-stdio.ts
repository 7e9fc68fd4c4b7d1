import { CairnError } from '@cairn/contracts';
import type { JsonLogger } from '@cairn/service-kit';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CairnRestClient } from './cairn-rest.client.js';
import type { McpGatewayConfig } from './mcp-gateway.config.js';
import { createMcpServer } from './mcp-server.factory.js';

/**
 * Serves one MCP session on stdin/stdout with the key in CAIRN_API_KEY. Only protocol messages
 * go to stdout; logs go to stderr. The key is checked with the REST gateway before the first
 * message is read, so a bad key stops the process (E_UNAUTHORIZED) instead of serving errors.
 * Resolves when the client closes stdin or the transport closes.
 */
export async function serveMcpStdio(config: McpGatewayConfig, logger: JsonLogger): Promise<void> {
  if (config.CAIRN_API_KEY === undefined) {
    throw new CairnError('E_UNAUTHORIZED', 'CAIRN_API_KEY is not set: the stdio MCP server acts with a Cairn API key', { variables: ['CAIRN_API_KEY'] });
  }
  const client = new CairnRestClient(config.CAIRN_MCP_UPSTREAM_URL, config.CAIRN_API_KEY);
  await client.checkKey();
  const server = createMcpServer(client);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    process.stdin.once('end', () => resolve());
    process.stdin.once('close', () => resolve());
  });
  await server.connect(transport);
  logger.write('info', 'serving MCP on stdio', { upstream: config.CAIRN_MCP_UPSTREAM_URL });
  await closed;
  await server.close().catch(() => undefined);
  logger.write('info', 'stdin closed; stopping');
}
