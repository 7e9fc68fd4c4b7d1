import { describe, expect, it } from 'vitest';
import { mcpStdioEnv } from './mcp.command.js';
import { formatUp } from './up.command.js';

describe('cairn mcp', () => {
  it("gives the stdio server the gateway and the key, and none of the caller's other CAIRN_* settings", () => {
    const env = mcpStdioEnv({ PATH: '/bin', CAIRN_HOME: '/h', CAIRN_URL: 'http://x', CAIRN_API_KEY: 'old' }, 'http://127.0.0.1:7420', 'cairn_key');
    expect(env).toEqual({ PATH: '/bin', CAIRN_MCP_TRANSPORT: 'stdio', CAIRN_MCP_UPSTREAM_URL: 'http://127.0.0.1:7420', CAIRN_API_KEY: 'cairn_key' });
  });

  it('cairn up prints the MCP endpoint when the stack has one', () => {
    const base = { url: 'http://127.0.0.1:7420', apiKey: 'k', keyFile: '/h/api-key', home: '/h', stackId: 'default', outcome: 'started' as const, restarted: [], services: {}, logDir: '/h/logs' };
    const up = formatUp({ ...base, mcpUrl: 'http://127.0.0.1:7421/mcp' }, 'OK');
    expect(up.human).toContain('mcp       http://127.0.0.1:7421/mcp');
    expect(up.machine).toMatchObject({ mcpUrl: 'http://127.0.0.1:7421/mcp' });
    expect(formatUp(base, 'OK').human).not.toContain('mcp ');
  });
});
