import type { ChainHead } from './append-body.builder.js';

/** A head as cached: with the message id of the event it holds, so a retry of it is recognised. */
export interface CachedHead extends ChainHead {
  msgId: string;
}

/**
 * The last known head of each recently written chain, least recently used evicted first (a
 * `Map` iterates in insertion order). A missing or stale head costs one read, never correctness:
 * the compare-and-set on the stream rejects a stale one.
 */
export class ChainHeadCache {
  private readonly heads = new Map<string, CachedHead>();

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.heads.size;
  }

  get(chainId: string): CachedHead | undefined {
    const head = this.heads.get(chainId);
    if (head !== undefined) {
      this.heads.delete(chainId);
      this.heads.set(chainId, head);
    }
    return head;
  }

  /** Records a head unless a later one (higher stream seq) is already known. */
  advance(chainId: string, head: CachedHead): void {
    const known = this.heads.get(chainId);
    if (known !== undefined && known.streamSeq > head.streamSeq) return;
    this.heads.delete(chainId);
    this.heads.set(chainId, head);
    if (this.heads.size > this.capacity) {
      const oldest = this.heads.keys().next();
      if (oldest.done !== true) this.heads.delete(oldest.value);
    }
  }

  forget(chainId: string): void {
    this.heads.delete(chainId);
  }
}
