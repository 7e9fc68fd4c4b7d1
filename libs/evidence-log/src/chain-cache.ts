/*
 * A bounded memory of chains as stored: for each chain, its messages from seq 1 without a gap
 * (entry i is chain seq i + 1), each with its stream seq, subject and exact bytes. It only ever
 * holds what was seen on the stream (a delivery, a read, our own acknowledged append). Stored
 * messages never change, so what is held is always a prefix of the chain: a read asks the stream
 * only for what follows it (one batch direct get), and a chain is served from it alone only when
 * its last entry is the chain's head on the stream right now.
 */

export interface CachedMessage {
  streamSeq: number;
  /** `<prefix>.<chain id>.<type>` */
  subject: string;
  data: Uint8Array;
  /** Its `Nats-Msg-Id`, when it was read with its headers. */
  msgId?: string;
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
   * a gap (a consumer that takes only some types sees most chains so) leaves the prefix held as it is.
   */
  observe(chainId: string, seq: number, streamSeq: number, data: Uint8Array, subject: string): void {
    if (!Number.isSafeInteger(seq) || seq < 1) return;
    const held = this.chains.get(chainId);
    if (held === undefined) {
      if (seq === 1) this.keep(chainId, [{ streamSeq, subject, data }]);
      return;
    }
    if (seq <= held.length) {
      if (held[seq - 1]!.streamSeq !== streamSeq) this.chains.delete(chainId);
      return;
    }
    if (held[held.length - 1]!.streamSeq >= streamSeq) {
      // Later in the chain yet stored earlier than what is held: this is not the chain that is held.
      this.chains.delete(chainId);
      return;
    }
    if (seq === held.length + 1) {
      held.push({ streamSeq, subject, data });
      this.keep(chainId, held);
    }
  }

  /** What is held of a chain (entry i is chain seq i + 1); empty when nothing is. */
  held(chainId: string): readonly CachedMessage[] {
    return this.chains.get(chainId) ?? [];
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

  /** Replaces what is held of a chain by a read of it from seq 1 (entry i is chain seq i + 1). */
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
