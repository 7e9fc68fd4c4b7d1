import { describe, expect, it } from 'vitest';
import { toHex, utf8 } from './bytes.js';
import { consistencyProof, inclusionProof, leafHash, rootHash, verifyConsistency, verifyInclusion } from './merkle.js';
import { MerkleTree } from './merkle-tree.js';

const hex = (hashes: readonly Uint8Array[]) => hashes.map(toHex);

describe('MerkleTree (cached complete subtrees)', () => {
  it('gives the same roots and proofs as the from-the-leaves functions, for every size and pair up to 33', async () => {
    const leaves = await Promise.all(Array.from({ length: 33 }, (_, i) => leafHash(utf8(`leaf ${i}`))));
    const tree = new MerkleTree();
    expect(toHex(await tree.root())).toBe(toHex(await rootHash([])));
    for (const leaf of leaves) await tree.append(leaf);
    expect(tree.size).toBe(33);
    for (let n = 1; n <= leaves.length; n++) {
      const prefix = leaves.slice(0, n);
      const root = await tree.root(n);
      expect(toHex(root)).toBe(toHex(await rootHash(prefix)));
      for (let m = 0; m <= n; m++) {
        const proof = await tree.consistencyProof(m, n);
        expect(hex(proof)).toEqual(hex(await consistencyProof(prefix, m)));
        expect(await verifyConsistency(m, n, proof, await tree.root(m), root)).toBe(true);
        if (m < n) {
          const path = await tree.inclusionProof(m, n);
          expect(hex(path)).toEqual(hex(await inclusionProof(prefix, m)));
          expect(await verifyInclusion(m, n, leaves[m]!, path, root)).toBe(true);
        }
      }
    }
    // ≈ 0.4 s on an idle machine; tens of thousands of WebCrypto digests, so more on a loaded one.
  }, 30_000);

  it('hashes the known RFC 6962 root of the reference leaves (appendData)', async () => {
    const tree = new MerkleTree();
    for (const hexLeaf of ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f']) {
      await tree.appendData(Uint8Array.from(hexLeaf.match(/../g) ?? [], (b) => Number.parseInt(b, 16)));
    }
    expect(toHex(await tree.root())).toBe('5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328');
    expect(toHex(await tree.root(3))).toBe('aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77');
  });

  it('refuses sizes and indices it does not hold', async () => {
    const tree = new MerkleTree();
    await tree.appendData(utf8('one'));
    await expect(tree.root(2)).rejects.toMatchObject({ code: 'E_INPUT' });
    await expect(tree.inclusionProof(1, 1)).rejects.toMatchObject({ code: 'E_INPUT' });
    await expect(tree.consistencyProof(2, 1)).rejects.toMatchObject({ code: 'E_INPUT' });
    await expect(tree.append(new Uint8Array(31))).rejects.toMatchObject({ code: 'E_INPUT' });
    expect(() => tree.leaf(1)).toThrow(/not in a tree of 1/);
  });

  it('proves in a large tree with few hashes (timed: 20 000 leaves)', async () => {
    const tree = new MerkleTree();
    const started = performance.now();
    for (let i = 0; i < 20_000; i++) await tree.appendData(utf8(`seal ${i}`));
    const built = performance.now() - started;
    const proofStart = performance.now();
    const path = await tree.inclusionProof(12_345);
    const consistency = await tree.consistencyProof(10_001);
    const proved = performance.now() - proofStart;
    expect(await verifyInclusion(12_345, 20_000, tree.leaf(12_345), path, await tree.root())).toBe(true);
    expect(await verifyConsistency(10_001, 20_000, consistency, await tree.root(10_001), await tree.root())).toBe(true);
    // Generous bounds on a loaded machine; the figures are printed for docs/proofs.md.
    expect(proved).toBeLessThan(1000);
    console.info(`MerkleTree: 20000 leaves appended in ${built.toFixed(0)} ms, an inclusion and a consistency proof in ${proved.toFixed(1)} ms`);
  });
});
