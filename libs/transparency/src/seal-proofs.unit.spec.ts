import { describe, expect, it } from 'vitest';
import { fromBase64, toBase64 } from './bytes.js';
import { signCheckpoint } from './checkpoint.js';
import { sealLeafHash } from './log-proof.js';
import { MerkleTree } from './merkle-tree.js';
import { formatVerifierKey, generateSigner, parseSignerKey, parseVerifierKey } from './note.js';
import type { NoteSigner } from './note.js';
import { checkSealProofs, inclusionProofFields } from './seal-proofs.js';
import type { SealProofReport } from './seal-proofs.js';
import { signSealStatement } from './seal-statement.js';
import type { SealStatement } from './seal-statement.js';

/* The x/mod/sumdb/note test key (as in note.unit.spec.ts): Ed25519 is deterministic, so its signatures are known answers. */
const PETER_SIGNER = 'PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz';
const PETER = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';

const statement = (i: number): SealStatement => ({
  chainId: `run_${String(i).padStart(4, '0')}`,
  headSeq: 10 + i,
  headHash: (i % 16).toString(16).repeat(64),
  evidenceDigest: ((i + 1) % 16).toString(16).repeat(64),
  finalState: 'SEALED',
});

/** The seal receipt a statement comes from (what the chain's last receipt carries). */
async function sealReceipt(s: SealStatement, signer: NoteSigner | null): Promise<Record<string, unknown>> {
  const receipt: Record<string, unknown> = { seq: s.headSeq + 1, type: 'run.sealed', run_id: s.chainId, prev_hash: s.headHash, evidence_digest: s.evidenceDigest, final_state: s.finalState };
  if (signer !== null) receipt.signature = await signSealStatement(s, signer);
  return receipt;
}

/** A log of `count` seals, signed by `signer`, and the proof of seal `index` with its checkpoint. */
async function logWith(count: number, index: number, signer: NoteSigner) {
  const tree = new MerkleTree();
  for (let i = 0; i < count; i++) await tree.append(await sealLeafHash(statement(i)));
  const checkpoint = await signCheckpoint(tree.size, await tree.root(), signer);
  const proof = { chainId: statement(index).chainId, leafIndex: index, treeSize: tree.size, leafHash: toBase64(tree.leaf(index)), hashes: (await tree.inclusionProof(index)).map(toBase64), checkpoint };
  return { proof, seal: await sealReceipt(statement(index), signer) };
}

const statuses = (report: SealProofReport) => ({
  signature: report.signature.status === 'failed' ? report.signature.reason : report.signature.status,
  checkpoint: report.checkpoint.status === 'failed' ? report.checkpoint.reason : report.checkpoint.status,
  leaf: report.leaf.status === 'failed' ? report.leaf.reason : report.leaf.status,
  inclusion: report.inclusion.status === 'failed' ? report.inclusion.reason : report.inclusion.status,
});

const flipByte = (base64: string, at = 0): string => {
  const raw = fromBase64(base64);
  raw[at] = raw[at]! ^ 1;
  return toBase64(raw);
};

describe("a seal's proofs, each checked on its own", () => {
  it('verifies a known-answer seal: a fixed key, a fixed statement, a fixed log', async () => {
    const signer = await parseSignerKey(PETER_SIGNER);
    const trusted = [await parseVerifierKey(PETER)];
    const { proof, seal } = await logWith(5, 3, signer);
    // The signature is the one the fixed key always makes over this statement's text.
    expect((seal.signature as { signature: string }).signature).toBe((await signSealStatement(statement(3), signer)).signature);
    const report = await checkSealProofs({ seal, inclusion: proof, sealSignature: seal.signature }, trusted);
    expect(statuses(report)).toEqual({ signature: 'verified', checkpoint: 'verified', leaf: 'verified', inclusion: 'verified' });
    expect(report.ok).toBe(true);
    expect(report.signature.message).toBe('signed by PeterNeumann+c74f20a3');
    expect(report.checkpoint.message).toBe('tree of 5, signed by PeterNeumann+c74f20a3');
    expect(report.inclusion.message).toBe('leaf 3 of 5, 3 hashes to the root');
  });

  it('turns exactly the line that broke, with its reason', async () => {
    const { signer } = await generateSigner('cairn.test/log');
    const trusted = [await parseVerifierKey(await formatVerifierKey(signer.name, signer.publicKey))];
    const { proof, seal } = await logWith(9, 4, signer);
    const check = async (input: { seal?: unknown; inclusion?: unknown; sealSignature?: unknown }, keys = trusted) => {
      const report = await checkSealProofs({ seal, inclusion: proof, ...input }, keys);
      expect(report.ok).toBe(false);
      return statuses(report);
    };
    const ok = 'verified';

    // A forged seal signature: only the signature line.
    const forgedSeal = { ...seal, signature: { ...(seal.signature as object), signature: flipByte((seal.signature as { signature: string }).signature, 10) } };
    expect(await check({ seal: forgedSeal })).toEqual({ signature: 'seal_signature_invalid', checkpoint: ok, leaf: ok, inclusion: ok });
    expect(await check({ sealSignature: { ...(seal.signature as object), key_id: '00000000' } })).toEqual({ signature: 'bundle_signature_mismatch', checkpoint: ok, leaf: ok, inclusion: ok });
    const { seal: strangers } = await logWith(9, 4, (await generateSigner('cairn.test/log')).signer);
    expect((await check({ seal: strangers })).signature).toBe('seal_key_unknown');
    expect(await check({ seal: await sealReceipt(statement(4), null) })).toEqual({ signature: 'seal_unsigned', checkpoint: ok, leaf: ok, inclusion: ok });

    // One byte of the checkpoint's root: its signature no longer holds, and the path is not checked against it.
    const lines = proof.checkpoint.split('\n');
    lines[2] = flipByte(lines[2]!, 5);
    expect(await check({ inclusion: { ...proof, checkpoint: lines.join('\n') } })).toEqual({ signature: ok, checkpoint: 'checkpoint_signature_invalid', leaf: ok, inclusion: 'skipped' });
    // One byte of one hash of the path.
    expect(await check({ inclusion: { ...proof, hashes: [flipByte(proof.hashes[0]!), ...proof.hashes.slice(1)] } })).toEqual({ signature: ok, checkpoint: ok, leaf: ok, inclusion: 'inclusion_invalid' });
    expect((await check({ inclusion: { ...proof, treeSize: 10 } })).inclusion).toBe('tree_size_mismatch');
    // Another seal's leaf, another chain's proof.
    expect(await check({ inclusion: { ...proof, leafHash: toBase64(await sealLeafHash(statement(5))) } })).toEqual({ signature: ok, checkpoint: ok, leaf: 'leaf_mismatch', inclusion: 'skipped' });
    expect((await check({ inclusion: { ...proof, chainId: 'run_0005' } })).leaf).toBe('proof_chain_mismatch');
    // Hostile shapes.
    expect((await check({ inclusion: { ...proof, hashes: 'AAAA' } })).leaf).toBe('proof_malformed');
    expect((await check({ inclusion: { ...proof, hashes: ['not base64'] } })).leaf).toBe('proof_malformed');
    expect((await check({ inclusion: null })).leaf).toBe('proof_malformed');
    expect((await check({ seal: { type: 'run.started' } })).signature).toBe('not_sealed');
    // No key to check against is a failure, never a pass.
    expect((await check({}, [])).signature).toBe('no_trusted_key');
  });

  it('reads an inclusion proof only in its exact shape', () => {
    const proof = { chainId: 'run_1', leafIndex: 0, treeSize: 1, leafHash: 'x', hashes: [], checkpoint: 'c' };
    expect(inclusionProofFields(proof)).toEqual(proof);
    expect(inclusionProofFields({ ...proof, leafIndex: -1 })).toBeNull();
    expect(inclusionProofFields({ ...proof, treeSize: 1.5 })).toBeNull();
    expect(inclusionProofFields({ ...proof, hashes: new Array(129).fill('a') })).toBeNull();
    expect(inclusionProofFields({ ...proof, checkpoint: 'x'.repeat(16 * 1024 + 1) })).toBeNull();
    expect(inclusionProofFields([proof])).toBeNull();
  });
});
