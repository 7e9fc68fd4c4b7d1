import { API_COMPONENTS, TlogConsistencyQuerySchema, WorkChainIdSchema } from '@cairn/contracts';
import type { TlogCheckpoint, TlogConsistencyProof, TlogInclusionProof } from '@cairn/contracts';
import { checked, signalOf } from './runs.js';
import { route } from './transport.js';
import type { Transport } from './transport.js';

/*
 * The deployment's log of seal heads (docs/proofs.md): its latest signed checkpoint, a sealed
 * chain's inclusion proof, the consistency proof between two tree sizes. What comes back is to be
 * verified against a key the caller pinned (@cairn/transparency), never trusted as fetched.
 */
export class Tlog {
  constructor(private readonly http: Transport) {}

  /** The latest signed checkpoint (one is signed on demand when none is yet). */
  async checkpoint(signal?: AbortSignal): Promise<TlogCheckpoint> {
    const { method, path } = route('getTlogCheckpoint');
    return this.http.json(method, path, API_COMPONENTS.TlogCheckpoint, signalOf(signal));
  }

  /** The inclusion proof of a sealed run's or sandbox's seal, with the checkpoint it leads to. */
  async inclusion(chainId: string, signal?: AbortSignal): Promise<TlogInclusionProof> {
    const chain = checked(WorkChainIdSchema, chainId, 'chain id');
    const { method, path } = route('getTlogInclusionProof');
    return this.http.json(method, path, API_COMPONENTS.TlogInclusionProof, { query: { chain }, ...signalOf(signal) });
  }

  /** The consistency proof from the tree of `from` leaves to the tree of `to`. */
  async consistency(from: number, to: number, signal?: AbortSignal): Promise<TlogConsistencyProof> {
    const query = checked(TlogConsistencyQuerySchema, { from, to }, 'tree sizes');
    const { method, path } = route('getTlogConsistencyProof');
    return this.http.json(method, path, API_COMPONENTS.TlogConsistencyProof, { query, ...signalOf(signal) });
  }
}
