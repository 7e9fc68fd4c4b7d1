import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { CairnKeys } from './cairn-rest.client.js';
import { inputSchemaOf, parseArgs } from './run-tools.js';

/*
 * The key tools: listing only (docs/adr/0011, docs/security.md). Creating or rotating a key hands
 * out a secret, and an agent that can mint credentials can outlive any revocation of its own; so
 * those stay with people (CLI, REST, dashboard). A listing shows no secret: an agent holding an
 * admin key may see which keys exist, their scopes and whether they still work.
 */

const ListKeysArgsSchema = z.strictObject({});

export interface KeyTool {
  definition: Tool;
  call(keys: CairnKeys, args: unknown): Promise<Record<string, unknown>>;
}

export const KEY_TOOLS: readonly KeyTool[] = [
  {
    definition: {
      name: 'keys_list',
      title: "List the tenant's API keys",
      description:
        "The API keys of this key's tenant (needs an admin key; others get E_FORBIDDEN): id, prefix and last four characters, " +
        'scopes, status (active, expired, revoked, pending), created, expires, revoked, rotations. Never a secret. ' +
        'Keys are created, rotated and revoked by people (cairn keys, REST, the dashboard), not through MCP.',
      inputSchema: inputSchemaOf(ListKeysArgsSchema),
      annotations: { title: "List the tenant's API keys", readOnlyHint: true, openWorldHint: false },
    },
    async call(keys, args) {
      parseArgs(ListKeysArgsSchema, args);
      return { ...(await keys.listKeys()) };
    },
  },
];
