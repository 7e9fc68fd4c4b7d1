import { API_ROUTES, CairnError, TlogConsistencyQuerySchema, TlogInclusionQuerySchema } from '@cairn/contracts';
import type { TlogCheckpoint, TlogConsistencyProof, TlogConsistencyQuery, TlogInclusionProof, TlogInclusionQuery } from '@cairn/contracts';
import type { StoredCheckpoint, TransparencyLog } from '@cairn/tlog';
import { bytesEqual, toBase64 } from '@cairn/transparency';
import { Controller, Inject, Query } from '@nestjs/common';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { RunReadsRepository } from '../runs/run-reads.repository.js';
import { SandboxReadsRepository } from '../sandboxes/sandbox-reads.repository.js';

/** Injection token of the gateway's reader of the log of seal heads (opened and closed by `startGateway`). */
export const GATEWAY_TLOG = Symbol('GATEWAY_TLOG');

function checkpointView(stored: StoredCheckpoint): TlogCheckpoint {
  return { checkpoint: stored.note, origin: stored.checkpoint.origin, size: stored.checkpoint.size, rootHash: toBase64(stored.checkpoint.rootHash) };
}

/**
 * `/v1/tlog/…`: the log of seal heads as a reader sees it (docs/proofs.md). The gateway holds no
 * key: checkpoints are the grader's (asked for when none covers what is asked), proofs are
 * computed here from the leaves in JetStream, against the checkpoint they lead to — checked to
 * match before it is served.
 */
@Controller()
export class TlogController {
  constructor(
    @Inject(GATEWAY_TLOG) private readonly tlog: TransparencyLog,
    private readonly runs: RunReadsRepository,
    private readonly sandboxes: SandboxReadsRepository,
  ) {}

  @ApiRoute(API_ROUTES.getTlogCheckpoint)
  async checkpoint(): Promise<TlogCheckpoint> {
    return checkpointView((await this.tlog.latestCheckpoint()) ?? (await this.tlog.requestCheckpoint()));
  }

  @ApiRoute(API_ROUTES.getTlogInclusionProof)
  async inclusion(@CurrentPrincipal() principal: Principal, @Query({ schema: TlogInclusionQuerySchema }) query: TlogInclusionQuery): Promise<TlogInclusionProof> {
    const chainId = query.chain;
    // Another tenant's chain is as unknown as one that does not exist.
    if (chainId.startsWith('sbx_')) await this.sandboxes.getSandbox(principal.tenant, chainId);
    else await this.runs.getRun(principal.tenant, chainId);
    const leaf = await this.tlog.leafOf(chainId);
    if (leaf === null) {
      const sealed = (await this.runs.sealSeq(chainId)) !== null;
      throw new CairnError('E_NOT_FOUND', sealed ? `${chainId} is sealed, and not in the log yet: the grader appends it shortly` : `${chainId} is not sealed: only a sealed chain is in the log`, {
        chainId,
        reason: sealed ? 'not_logged' : 'not_sealed',
      });
    }
    let stored = await this.tlog.latestCheckpoint();
    // On demand: a checkpoint that does not cover the leaf yet is replaced by a fresh one.
    if (stored === null || stored.checkpoint.size <= leaf.index) stored = await this.tlog.requestCheckpoint();
    if (stored.checkpoint.size <= leaf.index) throw new CairnError('E_UNAVAILABLE', `no checkpoint covers leaf ${leaf.index} of ${chainId} yet`, { chainId });
    const size = stored.checkpoint.size;
    const tree = await this.tlog.currentTree(size);
    if (!bytesEqual(await tree.root(size), stored.checkpoint.rootHash)) {
      throw new CairnError('E_INTERNAL', `the log's leaves do not hash to its checkpoint of size ${size}: the log was changed`, { size });
    }
    return {
      chainId,
      leafIndex: leaf.index,
      treeSize: size,
      leafHash: toBase64(tree.leaf(leaf.index)),
      hashes: (await tree.inclusionProof(leaf.index, size)).map(toBase64),
      checkpoint: stored.note,
    };
  }

  @ApiRoute(API_ROUTES.getTlogConsistencyProof)
  async consistency(@Query({ schema: TlogConsistencyQuerySchema }) query: TlogConsistencyQuery): Promise<TlogConsistencyProof> {
    if (query.from > query.to) throw new CairnError('E_INPUT', `from (${query.from}) is larger than to (${query.to}): a tree is consistent only with a larger one`, { from: query.from, to: query.to });
    const tree = await this.tlog.currentTree();
    if (query.to > tree.size) throw new CairnError('E_NOT_FOUND', `the log has ${tree.size} leaves, not ${query.to}`, { size: tree.size });
    return { from: query.from, to: query.to, hashes: (await tree.consistencyProof(query.from, query.to)).map(toBase64) };
  }
}
