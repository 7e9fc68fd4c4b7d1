import { CairnError } from '@cairn/contracts';
import { bytesEqual, concatBytes, sha256 } from './bytes.js';
import type { Bytes } from './bytes.js';

/*
 * The RFC 6962 Merkle tree (RFC 9162 §2.1): SHA-256, leaf hash H(0x00 ‖ d), interior node
 * H(0x01 ‖ left ‖ right), a tree of any size split at the largest power of two below it. Proofs
 * are generated from the leaf hashes (RFC 9162 §2.1.3.1, §2.1.4.1) and verified with the
 * algorithms of §2.1.3.2 and §2.1.4.2. Sizes and indices are plain numbers (exact to 2^53), and
 * every step uses arithmetic, never JavaScript's 32-bit bit operators.
 */

export const HASH_SIZE = 32;

const LEAF_PREFIX = new Uint8Array([0]);
const NODE_PREFIX = new Uint8Array([1]);

export function leafHash(data: Uint8Array): Promise<Bytes> {
  return sha256(concatBytes(LEAF_PREFIX, data));
}

export function nodeHash(left: Uint8Array, right: Uint8Array): Promise<Bytes> {
  return sha256(concatBytes(NODE_PREFIX, left, right));
}

/** The largest power of two strictly below n (n > 1). */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

function checkSize(value: number, what: string): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new CairnError('E_INPUT', `${what} must be a non-negative safe integer, not ${value}`);
}

/** MTH(D[n]) over leaf hashes already computed; the empty tree's root is SHA-256 of nothing. */
export async function rootHash(leaves: readonly Uint8Array[]): Promise<Bytes> {
  if (leaves.length === 0) return sha256(new Uint8Array(0));
  return subtreeHash(leaves, 0, leaves.length);
}

async function subtreeHash(leaves: readonly Uint8Array[], start: number, end: number): Promise<Bytes> {
  const n = end - start;
  if (n === 1) return Uint8Array.from(leaves[start]!);
  const k = splitPoint(n);
  return nodeHash(await subtreeHash(leaves, start, start + k), await subtreeHash(leaves, start + k, end));
}

/** PATH(m, D[n]): the inclusion proof of leaf `index` in the tree of `leaves`. */
export async function inclusionProof(leaves: readonly Uint8Array[], index: number): Promise<Bytes[]> {
  checkSize(index, 'the leaf index');
  if (index >= leaves.length) throw new CairnError('E_INPUT', `leaf ${index} is not in a tree of ${leaves.length}`);
  const path: Bytes[] = [];
  await pathOf(leaves, index, 0, leaves.length, path);
  return path;
}

async function pathOf(leaves: readonly Uint8Array[], m: number, start: number, end: number, out: Bytes[]): Promise<void> {
  const n = end - start;
  if (n === 1) return;
  const k = splitPoint(n);
  if (m < k) {
    await pathOf(leaves, m, start, start + k, out);
    out.push(await subtreeHash(leaves, start + k, end));
  } else {
    await pathOf(leaves, m - k, start + k, end, out);
    out.push(await subtreeHash(leaves, start, start + k));
  }
}

/** PROOF(m, D[n]): the consistency proof from the tree of the first `size1` leaves to all of them. */
export async function consistencyProof(leaves: readonly Uint8Array[], size1: number): Promise<Bytes[]> {
  checkSize(size1, 'the first size');
  if (size1 > leaves.length) throw new CairnError('E_INPUT', `a tree of ${size1} is not a prefix of one of ${leaves.length}`);
  const out: Bytes[] = [];
  if (size1 === 0 || size1 === leaves.length) return out;
  await subproof(leaves, size1, 0, leaves.length, true, out);
  return out;
}

async function subproof(leaves: readonly Uint8Array[], m: number, start: number, end: number, whole: boolean, out: Bytes[]): Promise<void> {
  const n = end - start;
  if (m === n) {
    if (!whole) out.push(await subtreeHash(leaves, start, end));
    return;
  }
  const k = splitPoint(n);
  if (m <= k) {
    await subproof(leaves, m, start, start + k, whole, out);
    out.push(await subtreeHash(leaves, start + k, end));
  } else {
    await subproof(leaves, m - k, start + k, end, false, out);
    out.push(await subtreeHash(leaves, start, start + k));
  }
}

const odd = (x: number): boolean => x % 2 === 1;
const half = (x: number): number => Math.floor(x / 2);

/** The root an inclusion proof leads to (RFC 9162 §2.1.3.2), or null when it cannot be one for these sizes. */
export async function rootFromInclusionProof(index: number, size: number, leaf: Uint8Array, proof: readonly Uint8Array[]): Promise<Bytes | null> {
  checkSize(index, 'the leaf index');
  checkSize(size, 'the tree size');
  if (index >= size || leaf.length !== HASH_SIZE || proof.some((p) => p.length !== HASH_SIZE)) return null;
  let fn = index;
  let sn = size - 1;
  let r: Bytes = Uint8Array.from(leaf);
  for (const p of proof) {
    if (sn === 0) return null;
    if (odd(fn) || fn === sn) {
      r = await nodeHash(p, r);
      if (!odd(fn)) {
        while (!odd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      r = await nodeHash(r, p);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 ? r : null;
}

export async function verifyInclusion(index: number, size: number, leaf: Uint8Array, proof: readonly Uint8Array[], root: Uint8Array): Promise<boolean> {
  const computed = await rootFromInclusionProof(index, size, leaf, proof);
  return computed !== null && bytesEqual(computed, root);
}

/** RFC 9162 §2.1.4.2: whether `proof` shows the tree of `size1` (root1) is a prefix of the tree of `size2` (root2). */
export async function verifyConsistency(size1: number, size2: number, proof: readonly Uint8Array[], root1: Uint8Array, root2: Uint8Array): Promise<boolean> {
  checkSize(size1, 'the first size');
  checkSize(size2, 'the second size');
  if (size2 < size1) return false;
  if (size1 === size2) return proof.length === 0 && bytesEqual(root1, root2);
  if (size1 === 0) return proof.length === 0;
  if (proof.length === 0 || proof.some((p) => p.length !== HASH_SIZE) || root1.length !== HASH_SIZE || root2.length !== HASH_SIZE) return false;
  // A first tree of a power-of-two size is a whole subtree: its root starts the path.
  let path: readonly Uint8Array[] = proof;
  if (isPowerOfTwo(size1)) path = [root1, ...proof];
  let fn = size1 - 1;
  let sn = size2 - 1;
  while (odd(fn)) {
    fn = half(fn);
    sn = half(sn);
  }
  let fr: Bytes = Uint8Array.from(path[0]!);
  let sr: Bytes = Uint8Array.from(path[0]!);
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (odd(fn) || fn === sn) {
      fr = await nodeHash(c, fr);
      sr = await nodeHash(c, sr);
      if (!odd(fn)) {
        while (!odd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      sr = await nodeHash(sr, c);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return bytesEqual(fr, root1) && bytesEqual(sr, root2) && sn === 0;
}

function isPowerOfTwo(n: number): boolean {
  let k = 1;
  while (k < n) k *= 2;
  return k === n;
}
