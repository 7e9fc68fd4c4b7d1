import { CairnError } from '@cairn/contracts';
import { sha256 } from './bytes.js';
import type { Bytes } from './bytes.js';
import { HASH_SIZE, leafHash, nodeHash } from './merkle.js';

/*
 * An append-only RFC 6962 tree that keeps every complete (perfect, aligned) subtree's hash, level
 * by level: appending a leaf costs one hash per subtree it completes (about one on average), and a
 * root, an inclusion or a consistency proof for any size up to the current one costs O(log² n)
 * hashes — every left subtree the RFC's recursion visits is a complete one, read from the levels;
 * only the subtrees along the right edge are hashed. The same proofs as ./merkle.ts, which
 * recomputes everything from the leaves (and is what the tests hold this to).
 */

/** One level's hashes in one growing buffer: a million leaves are a few buffers, not millions of arrays. */
class HashLevel {
  private buffer = new Uint8Array(HASH_SIZE * 64);
  length = 0;

  push(hash: Uint8Array): void {
    if ((this.length + 1) * HASH_SIZE > this.buffer.length) {
      const grown = new Uint8Array(this.buffer.length * 2);
      grown.set(this.buffer);
      this.buffer = grown;
    }
    this.buffer.set(hash, this.length * HASH_SIZE);
    this.length += 1;
  }

  get(index: number): Bytes {
    return this.buffer.slice(index * HASH_SIZE, (index + 1) * HASH_SIZE);
  }
}

function checkSize(value: number, what: string): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new CairnError('E_INPUT', `${what} must be a non-negative safe integer, not ${value}`);
}

/** The largest power of two strictly below n (n > 1). */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** log2(n) when n is a power of two, else -1. */
function exactLog2(n: number): number {
  let level = 0;
  let k = 1;
  while (k < n) {
    k *= 2;
    level += 1;
  }
  return k === n ? level : -1;
}

/**
 * The two RFC 6962 hashes. WebCrypto's by default (the browser); a Node process may give a
 * synchronous one (node:crypto), about ten times faster when a large log is loaded at boot.
 */
export interface TreeHasher {
  leaf(data: Uint8Array): Bytes | Promise<Bytes>;
  node(left: Uint8Array, right: Uint8Array): Bytes | Promise<Bytes>;
}

const WEBCRYPTO_HASHER: TreeHasher = { leaf: leafHash, node: nodeHash };

export class MerkleTree {
  /** levels[h] holds the hash of each complete subtree of 2^h leaves, left to right. */
  private readonly levels: HashLevel[] = [new HashLevel()];

  constructor(private readonly hasher: TreeHasher = WEBCRYPTO_HASHER) {}

  get size(): number {
    return this.levels[0]!.length;
  }

  /** The leaf hash at `index`. */
  leaf(index: number): Bytes {
    checkSize(index, 'the leaf index');
    if (index >= this.size) throw new CairnError('E_INPUT', `leaf ${index} is not in a tree of ${this.size}`);
    return this.levels[0]!.get(index);
  }

  /** Appends a leaf hash (32 bytes), completing the subtrees it closes. */
  async append(hash: Uint8Array): Promise<void> {
    if (hash.length !== HASH_SIZE) throw new CairnError('E_INPUT', `a leaf hash is ${HASH_SIZE} bytes, not ${hash.length}`);
    this.levels[0]!.push(hash);
    let index = this.size - 1;
    for (let level = 0; index % 2 === 1; level++) {
      const below = this.levels[level]!;
      const up = (this.levels[level + 1] ??= new HashLevel());
      up.push(await this.hasher.node(below.get(index - 1), below.get(index)));
      index = (index - 1) / 2;
    }
  }

  /** Appends the leaf of `data`: H(0x00 ‖ data). */
  async appendData(data: Uint8Array): Promise<void> {
    await this.append(await this.hasher.leaf(data));
  }

  /** MTH of the first `size` leaves (the empty tree's is SHA-256 of nothing). */
  async root(size: number = this.size): Promise<Bytes> {
    this.checkTreeSize(size);
    if (size === 0) return sha256(new Uint8Array(0));
    return this.subtree(0, size);
  }

  /** PATH(index, D[size]). */
  async inclusionProof(index: number, size: number = this.size): Promise<Bytes[]> {
    this.checkTreeSize(size);
    checkSize(index, 'the leaf index');
    if (index >= size) throw new CairnError('E_INPUT', `leaf ${index} is not in a tree of ${size}`);
    const out: Bytes[] = [];
    await this.pathOf(index, 0, size, out);
    return out;
  }

  /** PROOF(size1, D[size2]). */
  async consistencyProof(size1: number, size2: number = this.size): Promise<Bytes[]> {
    this.checkTreeSize(size2);
    checkSize(size1, 'the first size');
    if (size1 > size2) throw new CairnError('E_INPUT', `a tree of ${size1} is not a prefix of one of ${size2}`);
    const out: Bytes[] = [];
    if (size1 === 0 || size1 === size2) return out;
    await this.subproof(size1, 0, size2, true, out);
    return out;
  }

  private checkTreeSize(size: number): void {
    checkSize(size, 'the tree size');
    if (size > this.size) throw new CairnError('E_INPUT', `the tree has ${this.size} leaves, not ${size}`);
  }

  private async subtree(start: number, end: number): Promise<Bytes> {
    const n = end - start;
    const level = exactLog2(n);
    if (level !== -1 && start % n === 0) {
      const complete = this.levels[level];
      if (complete !== undefined && start / n < complete.length) return complete.get(start / n);
    }
    const k = splitPoint(n);
    return this.hasher.node(await this.subtree(start, start + k), await this.subtree(start + k, end));
  }

  private async pathOf(m: number, start: number, end: number, out: Bytes[]): Promise<void> {
    const n = end - start;
    if (n === 1) return;
    const k = splitPoint(n);
    if (m < k) {
      await this.pathOf(m, start, start + k, out);
      out.push(await this.subtree(start + k, end));
    } else {
      await this.pathOf(m - k, start + k, end, out);
      out.push(await this.subtree(start, start + k));
    }
  }

  private async subproof(m: number, start: number, end: number, whole: boolean, out: Bytes[]): Promise<void> {
    const n = end - start;
    if (m === n) {
      if (!whole) out.push(await this.subtree(start, end));
      return;
    }
    const k = splitPoint(n);
    if (m <= k) {
      await this.subproof(m, start, start + k, whole, out);
      out.push(await this.subtree(start + k, end));
    } else {
      await this.subproof(m - k, start + k, end, false, out);
      out.push(await this.subtree(start, start + k));
    }
  }
}
