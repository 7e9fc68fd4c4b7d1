import { describe, expect, it } from 'vitest';
import { fromBase64, fromHex, toHex, utf8 } from './bytes.js';
import { consistencyProof, inclusionProof, leafHash, nodeHash, rootHash, verifyConsistency, verifyInclusion } from './merkle.js';

/*
 * Known answers from transparency-dev/merkle (Apache-2.0), which carries the RFC 6962 reference
 * vectors of Certificate Transparency: rfc6962/rfc6962_test.go (hasher), testonly/constants.go
 * (leaf inputs, node and root hashes), proof/verify_test.go (inclusion and consistency proofs),
 * and testdata/inclusion/*\/happy-path.json, testdata/consistency/*\/happy-path.json.
 */

const LEAF_INPUTS = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'].map((hex) => fromHex(hex));

/** testonly/constants.go RootHashes(), by tree size 0..8. */
const ROOTS = [
  'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
];

/** proof/verify_test.go inclusionProofs: {leaf (1-based), size, proof}. */
const INCLUSION: [number, number, string[]][] = [
  [1, 1, []],
  [
    1,
    8,
    [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ],
  ],
  [
    6,
    8,
    [
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ],
  ],
  [3, 3, ['fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125']],
  [
    2,
    5,
    [
      '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
    ],
  ],
];

/** proof/verify_test.go consistencyProofs: {size1, size2, proof}. */
const CONSISTENCY: [number, number, string[]][] = [
  [1, 1, []],
  [
    1,
    8,
    [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ],
  ],
  [
    6,
    8,
    [
      '0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ],
  ],
  [2, 5, ['5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e', 'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b']],
  [
    6,
    7,
    [
      '0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a',
      'b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ],
  ],
];

const hexes = (list: readonly Uint8Array[]) => list.map((h) => toHex(h));
const leafHashes = () => Promise.all(LEAF_INPUTS.map((d) => leafHash(d)));

describe('RFC 6962 hashing (transparency-dev/merkle rfc6962_test.go)', () => {
  it('hashes the empty tree, an empty leaf, a leaf and a node', async () => {
    expect(toHex(await rootHash([]))).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(toHex(await leafHash(new Uint8Array(0)))).toBe('6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d');
    expect(toHex(await leafHash(utf8('L123456')))).toBe('395aa064aa4c29f7010acfe3f25db9485bbd4b91897b6ad7ad547639252b4d56');
    expect(toHex(await nodeHash(utf8('N123'), utf8('N456')))).toBe('aa217fe888e47007fa15edab33c2b492a722cb106c64667fc2b044444de66bbb');
  });

  it('computes the root of every tree size 0..8 over the reference leaves', async () => {
    const leaves = await leafHashes();
    for (let size = 0; size <= 8; size++) expect(toHex(await rootHash(leaves.slice(0, size)))).toBe(ROOTS[size]);
  });
});

describe('inclusion proofs (RFC 9162 §2.1.3)', () => {
  it.each(INCLUSION)('leaf %i of %i: generated as the reference proof, and verifies', async (leaf, size, expected) => {
    const leaves = (await leafHashes()).slice(0, size);
    const proof = await inclusionProof(leaves, leaf - 1);
    expect(hexes(proof)).toEqual(expected);
    expect(await verifyInclusion(leaf - 1, size, leaves[leaf - 1]!, proof, fromHex(ROOTS[size]!))).toBe(true);
  });

  it('verifies the happy paths of testdata/inclusion (base64 as published)', async () => {
    const root = fromBase64('XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=');
    const first = ['lqKW0iTyhcZ77pPDD4owkVfw2qNdxbh+QQt4YwoJz8c=', 'Xwg/ChozygdqlSeYMlgNs+DvRYS9/x9UyKNg9Q3jAx4=', 'a0eq8p7jwq+a+Im8H7klTavTEXfxYjLdaqsDXKOb9uQ='].map((b) => fromBase64(b));
    expect(await verifyInclusion(0, 8, fromBase64('bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0='), first, root)).toBe(true);
    const sixth = ['vBoGQ7EuTS18d5GPROD095qDi2z57FtcKD4fTYhZnms=', 'yoVOoSjtBQtBs1/8G4e46yveRh6eO1WW7Oa51ZdaCuA=', '037kGJdt2VdTwcc4Yrk5j6Kiz5tP8P3+izDNlSCWFLc='].map((b) => fromBase64(b));
    expect(await verifyInclusion(5, 8, fromBase64('QnGia+DYqE8L1UyMMC58s6O10fpngKQLzOKHNHfatlg='), sixth, root)).toBe(true);
  });

  it("refuses every corruption of verify_test.go's corruptInclusionProof", async () => {
    const leaves = await leafHashes();
    const someHash = fromHex('abacaba000000000000000000000000000000000000000000060061e00123456');
    for (const [leaf, size, expected] of INCLUSION.filter(([, , p]) => p.length > 0)) {
      const index = leaf - 1;
      const proof = expected.map((h) => fromHex(h));
      const root = fromHex(ROOTS[size]!);
      const hash = leaves[index]!;
      const probes: [number, number, Uint8Array, Uint8Array[], Uint8Array][] = [
        [index - 1, size, hash, proof, root],
        [index + 1, size, hash, proof, root],
        [index ^ 2, size, hash, proof, root],
        [index, size * 2, hash, proof, root],
        [index, Math.floor(size / 2), hash, proof, root],
        [index, size, utf8('WrongLeaf'), proof, root],
        [index, size, fromHex(ROOTS[0]!), proof, fromHex(ROOTS[0]!)],
        [index, size, hash, proof, someHash],
        [index, size, hash, [...proof, new Uint8Array(0)], root],
        [index, size, hash, [...proof, root], root],
        [index, size, hash, [new Uint8Array(0), ...proof], root],
        [index, size, hash, [root, ...proof], root],
        [index, size, hash, proof.slice(0, -1), root],
        ...proof.map((_, i): [number, number, Uint8Array, Uint8Array[], Uint8Array] => {
          const wrong = proof.map((p) => Uint8Array.from(p));
          wrong[i]![0]! ^= 8;
          return [index, size, hash, wrong, root];
        }),
      ];
      if (proof.length > 1) probes.push([index, size, hash, [proof[0]!, someHash, ...proof.slice(1)], root]);
      for (const [i, s, h, p, r] of probes) {
        if (i < 0 || s < 0) continue;
        expect(await verifyInclusion(i, s, h, p, r)).toBe(false);
      }
    }
  });
});

describe('consistency proofs (RFC 9162 §2.1.4)', () => {
  it.each(CONSISTENCY)('from %i to %i: generated as the reference proof, and verifies', async (size1, size2, expected) => {
    const leaves = (await leafHashes()).slice(0, size2);
    const proof = await consistencyProof(leaves, size1);
    expect(hexes(proof)).toEqual(expected);
    expect(await verifyConsistency(size1, size2, proof, fromHex(ROOTS[size1]!), fromHex(ROOTS[size2]!))).toBe(true);
  });

  it('verifies the happy path of testdata/consistency/1 (base64 as published)', async () => {
    const proof = ['lqKW0iTyhcZ77pPDD4owkVfw2qNdxbh+QQt4YwoJz8c=', 'Xwg/ChozygdqlSeYMlgNs+DvRYS9/x9UyKNg9Q3jAx4=', 'a0eq8p7jwq+a+Im8H7klTavTEXfxYjLdaqsDXKOb9uQ='].map((b) => fromBase64(b));
    expect(await verifyConsistency(1, 8, proof, fromBase64('bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0='), fromBase64('XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg='))).toBe(true);
  });

  it('follows verify_test.go TestVerifyConsistency on the edge sizes', async () => {
    const a = utf8("don't care 1");
    const b = utf8("don't care 2");
    const empty = fromHex(ROOTS[0]!);
    expect(await verifyConsistency(0, 0, [], a, b)).toBe(false);
    expect(await verifyConsistency(1, 1, [], a, b)).toBe(false);
    expect(await verifyConsistency(0, 0, [], a, a)).toBe(true);
    expect(await verifyConsistency(0, 1, [], a, b)).toBe(true);
    expect(await verifyConsistency(1, 1, [], b, b)).toBe(true);
    expect(await verifyConsistency(1, 0, [], a, b)).toBe(false);
    expect(await verifyConsistency(2, 1, [], a, b)).toBe(false);
    expect(await verifyConsistency(1, 2, [], a, b)).toBe(false);
    expect(await verifyConsistency(0, 0, [empty], empty, empty)).toBe(false);
    expect(await verifyConsistency(0, 1, [empty], empty, empty)).toBe(false);
    expect(await verifyConsistency(1, 1, [empty], empty, empty)).toBe(false);
  });

  it("refuses every corruption of verify_test.go's corruptConsistencyProof", async () => {
    for (const [size1, size2, expected] of CONSISTENCY.filter(([, , p]) => p.length > 0)) {
      const proof = expected.map((h) => fromHex(h));
      const r1 = fromHex(ROOTS[size1]!);
      const r2 = fromHex(ROOTS[size2]!);
      const wrong = utf8('WrongRoot');
      const probes: [number, number, Uint8Array[], Uint8Array, Uint8Array][] = [
        [size1 - 1, size2, proof, r1, r2],
        [size1 + 1, size2, proof, r1, r2],
        [size1 ^ 2, size2, proof, r1, r2],
        [size1, size2 * 2, proof, r1, r2],
        [size1, Math.floor(size2 / 2), proof, r1, r2],
        [size1, size2, proof, wrong, r2],
        [size1, size2, proof, r1, wrong],
        [size1, size2, proof, r2, r1],
        [size1, size2, [], r1, r2],
        [size1, size2, [...proof, new Uint8Array(0)], r1, r2],
        [size1, size2, [...proof, r1], r1, r2],
        [size1, size2, [...proof, r2], r1, r2],
        [size1, size2, [new Uint8Array(0), ...proof], r1, r2],
        [size1, size2, [r1, ...proof], r1, r2],
        [size1, size2, [r2, ...proof], r1, r2],
        [size1, size2, [proof[0]!, ...proof], r1, r2],
        [size1, size2, proof.slice(0, -1), r1, r2],
        ...proof.map((_, i): [number, number, Uint8Array[], Uint8Array, Uint8Array] => {
          const bad = proof.map((p) => Uint8Array.from(p));
          bad[i]![0]! ^= 16;
          return [size1, size2, bad, r1, r2];
        }),
      ];
      for (const [s1, s2, p, a, b] of probes) expect(await verifyConsistency(s1, s2, p, a, b)).toBe(false);
    }
  });

  it('proves and verifies every pair of sizes up to 17 leaves, and every inclusion', async () => {
    const leaves = await Promise.all(Array.from({ length: 17 }, (_, i) => leafHash(utf8(`leaf ${i}`))));
    const roots = [await rootHash([])];
    for (let n = 1; n <= leaves.length; n++) roots.push(await rootHash(leaves.slice(0, n)));
    for (let n = 1; n <= leaves.length; n++) {
      for (let m = 0; m <= n; m++) {
        const proof = await consistencyProof(leaves.slice(0, n), m);
        expect(await verifyConsistency(m, n, proof, roots[m]!, roots[n]!)).toBe(true);
        if (m < n) expect(await verifyInclusion(m, n, leaves[m]!, await inclusionProof(leaves.slice(0, n), m), roots[n]!)).toBe(true);
      }
    }
  });
});
