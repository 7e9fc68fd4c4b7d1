/** Injection token of the MCP gateway's `McpGatewayConfig`. */
export const MCP_CONFIG = Symbol('MCP_CONFIG');
