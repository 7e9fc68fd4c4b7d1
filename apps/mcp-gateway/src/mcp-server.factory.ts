import { readFileSync } from 'node:fs';
import { CairnError } from '@cairn/contracts';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { CairnKeys, CairnRuns, CairnSandboxes, CairnTlog } from './cairn-rest.client.js';
import { KEY_TOOLS } from './key-tools.js';
import { RUN_TOOLS } from './run-tools.js';
import { SANDBOX_TOOLS } from './sandbox-tools.js';
import { TLOG_TOOLS } from './tlog-tools.js';
import { toolError, toolResult } from './tool-errors.js';

export const MCP_SERVER_NAME = 'cairn';

function packageVersion(): string {
  // src/ and dist/ both sit one level below the package root.
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
}

const VERSION = packageVersion();

const INSTRUCTIONS =
  'Cairn runs untrusted work in hardened sandboxes and keeps a hash-chained evidence log of every step. ' +
  'Submit a RunSpec with run_submit (steps are argv arrays), poll run_status until sealed is true, read the receipts with ' +
  'run_events, read what it printed and wrote with run_outputs and run_artifact (checked against the chain), and check the ' +
  'evidence yourself with run_verify. For interactive work, sandbox_create starts a sandbox; then ' +
  'sandbox_write_file, sandbox_exec (argv arrays) and sandbox_read_file, and sandbox_destroy when done — every operation a ' +
  "receipt on the sandbox's own chain. With an admin key, keys_list shows the tenant's API keys (never a secret). " +
  'tlog_checkpoint, tlog_inclusion_proof and tlog_consistency_proof serve the log of seal heads (signed checkpoints and proofs to check against a pinned key). ' +
  'Errors carry Cairn error codes (E_INPUT, E_NOT_FOUND, …).';

/** What the server's tools act on: the REST gateway with the caller's key. */
export type CairnApi = CairnRuns & CairnSandboxes & CairnKeys & CairnTlog;

interface AnyTool {
  definition: Tool;
  call(cairn: CairnApi, args: unknown): Promise<Record<string, unknown>>;
}

const TOOLS: readonly AnyTool[] = [...RUN_TOOLS, ...SANDBOX_TOOLS, ...KEY_TOOLS, ...TLOG_TOOLS];
const TOOLS_BY_NAME = new Map(TOOLS.map((tool) => [tool.definition.name, tool]));

/**
 * One MCP server (one session) acting for one Cairn API key. The low-level `Server` rather than
 * `McpServer`: the tools advertise the contracts' own JSON Schemas and validate arguments
 * themselves, so bad input comes back as a tool error carrying E_INPUT (McpServer would answer
 * its own validation error, without Cairn's code).
 */
export function createMcpServer(cairn: CairnApi): Server {
  const server = new Server({ name: MCP_SERVER_NAME, title: 'Cairn', version: VERSION }, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOLS.map((tool) => tool.definition) }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const tool = TOOLS_BY_NAME.get(request.params.name);
    // As the SDK's McpServer does: an unknown tool is a tool error the model can read and act on.
    if (tool === undefined) {
      return toolError(new CairnError('E_INPUT', `unknown tool ${JSON.stringify(request.params.name)}; the tools are ${TOOLS.map((t) => t.definition.name).join(', ')}`));
    }
    try {
      return toolResult(await tool.call(cairn, request.params.arguments));
    } catch (error) {
      return toolError(error);
    }
  });
  return server;
}
