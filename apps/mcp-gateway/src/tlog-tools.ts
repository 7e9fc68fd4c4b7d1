import { TlogConsistencyQuerySchema, WorkChainIdSchema } from '@cairn/contracts';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { CairnTlog } from './cairn-rest.client.js';
import { inputSchemaOf, parseArgs } from './run-tools.js';

/*
 * The log of seal heads (docs/proofs.md), read only: the latest signed checkpoint, a sealed chain's
 * inclusion proof, a consistency proof between two sizes — the same answers as REST. They are
 * proofs to check against a pinned key (`cairn verify`), not verdicts: a tool returns them as served.
 */

const CheckpointArgsSchema = z.strictObject({});
const InclusionArgsSchema = z.strictObject({ chain: WorkChainIdSchema.describe('a sealed run (run_…) or sandbox (sbx_…) of this key’s tenant') });
const ConsistencyArgsSchema = z.strictObject({
  from: TlogConsistencyQuerySchema.shape.from.describe('the tree size of the checkpoint kept'),
  to: TlogConsistencyQuerySchema.shape.to.describe('the tree size of the newer checkpoint'),
});

export interface TlogTool {
  definition: Tool;
  call(tlog: CairnTlog, args: unknown): Promise<Record<string, unknown>>;
}

const readOnly = (title: string) => ({ title, readOnlyHint: true, openWorldHint: false });

export const TLOG_TOOLS: readonly TlogTool[] = [
  {
    definition: {
      name: 'tlog_checkpoint',
      title: 'The latest signed checkpoint of the log of seal heads',
      description:
        "The deployment's latest checkpoint: a C2SP tlog-checkpoint (origin = the seal key's name, tree size, base64 RFC 6962 root) signed with the deployment's seal key, " +
        'as the signed note (`checkpoint`) and its parts. Verify it with a pinned key (cairn verify --checkpoint), not by trusting this answer.',
      inputSchema: inputSchemaOf(CheckpointArgsSchema),
      annotations: readOnly('The latest signed checkpoint'),
    },
    async call(tlog, args) {
      parseArgs(CheckpointArgsSchema, args);
      return { ...(await tlog.checkpoint()) };
    },
  },
  {
    definition: {
      name: 'tlog_inclusion_proof',
      title: "A sealed chain's inclusion proof",
      description:
        "The proof that a sealed run's or sandbox's seal statement is a leaf of the log: leaf index, tree size, the leaf hash, the path's hashes (base64) and the signed checkpoint they lead to. " +
        'E_NOT_FOUND for a chain that is not sealed (details.reason not_sealed), not logged yet (not_logged), or not this tenant’s.',
      inputSchema: inputSchemaOf(InclusionArgsSchema),
      annotations: readOnly("A sealed chain's inclusion proof"),
    },
    async call(tlog, args) {
      const { chain } = parseArgs(InclusionArgsSchema, args);
      return { ...(await tlog.inclusion(chain)) };
    },
  },
  {
    definition: {
      name: 'tlog_consistency_proof',
      title: 'A consistency proof between two tree sizes',
      description:
        'The RFC 9162 consistency proof that the tree of `from` leaves is a prefix of the tree of `to` (what a witness checks between a checkpoint it kept and a newer one). ' +
        'E_INPUT when from > to; E_NOT_FOUND when the log has fewer than `to` leaves.',
      inputSchema: inputSchemaOf(ConsistencyArgsSchema),
      annotations: readOnly('A consistency proof'),
    },
    async call(tlog, args) {
      const { from, to } = parseArgs(ConsistencyArgsSchema, args);
      return { ...(await tlog.consistency(from, to)) };
    },
  },
];
