/*
 * A bounded memory of chains as stored: for each chain, its messages from seq 1 without a gap
 * (entry i is chain seq i + 1), each with its stream seq and its exact bytes. It only ever holds
 * what was seen on the stream (a delivery, a read, our own acknowledged append), and a chain is
 * served from it only when its last entry is the chain's head on the stream right now — so a read
 * from it is the same as a read from the stream, without an ordered consumer per read.
 */

export interface CachedMessage {
  streamSeq: number;
  data: Uint8Array;
  /**
   * The message parsed, once, and deeply frozen: every read of the chain hands out the same
   * objects, so what is derived from them per object (a validated receipt) is derived once.
   */
  parsed?: unknown;
}

/** Chains remembered by default; a run's chain is a few dozen small messages. */
export const DEFAULT_CACHED_CHAINS = 512;

export class ChainCache {
  private readonly chains = new Map<string, CachedMessage[]>();

  constructor(private readonly maxChains: number = DEFAULT_CACHED_CHAINS) {}

  get size(): number {
    return this.chains.size;
  }

  /**
   * Takes note of chain seq `seq` of `chainId`, stored at `streamSeq`. Extends the chain when it is
   * the next one; a message already held must be the same (else the chain is forgotten); one past
   * a gap forgets the chain, as nothing before it is known.
   */
  observe(chainId: string, seq: number, streamSeq: number, data: Uint8Array): void {
    if (!Number.isSafeInteger(seq) || seq < 1) return;
    const held = this.chains.get(chainId);
    if (held === undefined) {
      if (seq === 1) this.keep(chainId, [{ streamSeq, data }]);
      return;
    }
    if (seq <= held.length) {
      if (held[seq - 1]!.streamSeq !== streamSeq) this.chains.delete(chainId);
      return;
    }
    if (seq === held.length + 1 && held[held.length - 1]!.streamSeq < streamSeq) {
      held.push({ streamSeq, data });
      this.keep(chainId, held);
      return;
    }
    this.chains.delete(chainId);
  }

  /**
   * Extends a held chain by its next message only (the head just read, one past what was seen);
   * anything else changes nothing. True when the chain now ends with it.
   */
  extend(chainId: string, seq: number, streamSeq: number, data: Uint8Array): boolean {
    const held = this.chains.get(chainId);
    if (held === undefined || seq !== held.length + 1 || held[held.length - 1]!.streamSeq >= streamSeq) return false;
    held.push({ streamSeq, data });
    this.keep(chainId, held);
    return true;
  }

  /** The parsed form held for chain seq `seq` stored at `streamSeq`, if any (kept across re-reads). */
  parsedAt(chainId: string, seq: number, streamSeq: number): unknown {
    const entry = this.chains.get(chainId)?.[seq - 1];
    return entry !== undefined && entry.streamSeq === streamSeq ? entry.parsed : undefined;
  }

  /** Records the parsed form of chain seq `seq` stored at `streamSeq`, when that message is held and has none yet. */
  adopt(chainId: string, seq: number, streamSeq: number, parsed: unknown): void {
    const entry = this.chains.get(chainId)?.[seq - 1];
    if (entry !== undefined && entry.streamSeq === streamSeq) entry.parsed ??= parsed;
  }

  /** Replaces what is held of a chain by a whole read of it (entry i is chain seq i + 1). */
  remember(chainId: string, messages: CachedMessage[]): void {
    if (messages.length === 0) this.chains.delete(chainId);
    else this.keep(chainId, messages);
  }

  /**
   * The chain's messages from seq 1 to `headSeq`, when held up to there and the one at `headSeq`
   * was stored at `headStreamSeq`; otherwise null (read it from the stream).
   */
  upTo(chainId: string, headSeq: number, headStreamSeq: number): readonly CachedMessage[] | null {
    const held = this.chains.get(chainId);
    if (held === undefined || held.length < headSeq || headSeq < 1) return null;
    if (held[headSeq - 1]!.streamSeq !== headStreamSeq) {
      this.chains.delete(chainId);
      return null;
    }
    this.keep(chainId, held);
    return held.slice(0, headSeq);
  }

  forget(chainId: string): void {
    this.chains.delete(chainId);
  }

  /** Most recently used last; the least recently used chain goes first when full. */
  private keep(chainId: string, messages: CachedMessage[]): void {
    this.chains.delete(chainId);
    this.chains.set(chainId, messages);
    while (this.chains.size > this.maxChains) {
      const oldest = this.chains.keys().next().value;
      if (oldest === undefined) break;
      this.chains.delete(oldest);
    }
  }
}
