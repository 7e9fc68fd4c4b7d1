export { CairnRestClient } from './cairn-rest.client.js';
export type { CairnRuns } from './cairn-rest.client.js';
export { DEFAULT_ALLOWED_HOSTS, McpGatewayConfigSchema } from './mcp-gateway.config.js';
export type { McpGatewayConfig } from './mcp-gateway.config.js';
export { createMcpServer, MCP_SERVER_NAME } from './mcp-server.factory.js';
export { RUN_TOOLS, verifyRun } from './run-tools.js';
export { MCP_ERROR_HINTS, toolError } from './tool-errors.js';
export { MCP_GATEWAY_SERVICE, startMcpHttp } from './start-mcp-http.js';
export type { RunningMcpHttp } from './start-mcp-http.js';
