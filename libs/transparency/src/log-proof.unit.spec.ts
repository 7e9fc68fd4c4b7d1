import { describe, expect, it } from 'vitest';
import { fromBase64, toBase64 } from './bytes.js';
import { formatCheckpoint, parseCheckpoint, signCheckpoint } from './checkpoint.js';
import { sealLeafHash, verifyCheckpointConsistency, verifyCheckpointNote, verifySealInclusion } from './log-proof.js';
import type { InclusionProofFields } from './log-proof.js';
import { MerkleTree } from './merkle-tree.js';
import { formatVerifierKey, generateSigner, parseNote, parseVerifierKey, signNote } from './note.js';
import type { NoteSigner, NoteVerifier } from './note.js';
import type { SealStatement } from './seal-statement.js';

const statement = (i: number): SealStatement => ({
  chainId: `run_${String(i).padStart(4, '0')}`,
  headSeq: 10 + i,
  headHash: (i % 16).toString(16).repeat(64),
  evidenceDigest: (i % 16).toString(16).repeat(64),
  finalState: 'SEALED',
});

async function verifierOf(signer: NoteSigner): Promise<NoteVerifier> {
  return parseVerifierKey(await formatVerifierKey(signer.name, signer.publicKey));
}

async function logOf(count: number, signer: NoteSigner): Promise<{ tree: MerkleTree; note: string }> {
  const tree = new MerkleTree();
  for (let i = 0; i < count; i++) await tree.append(await sealLeafHash(statement(i)));
  return { tree, note: await signCheckpoint(tree.size, await tree.root(), signer) };
}

async function proofOf(tree: MerkleTree, index: number, note: string): Promise<InclusionProofFields> {
  return {
    chainId: statement(index).chainId,
    leafIndex: index,
    treeSize: tree.size,
    leafHash: toBase64(tree.leaf(index)),
    hashes: (await tree.inclusionProof(index)).map(toBase64),
    checkpoint: note,
  };
}

describe('the log of seal heads, as a reader checks it', () => {
  it('verifies a checkpoint, a seal included in it, and a consistent later checkpoint', async () => {
    const { signer } = await generateSigner('cairn/test-log');
    const trusted = [await verifierOf(signer)];
    const { tree, note } = await logOf(7, signer);
    const opened = await verifyCheckpointNote(note, trusted);
    expect(opened).toMatchObject({ ok: true, checkpoint: { origin: 'cairn/test-log', size: 7 } });
    expect(await verifySealInclusion(statement(3), await proofOf(tree, 3, note), trusted)).toMatchObject({ ok: true, leafIndex: 3 });

    for (let i = 7; i < 12; i++) await tree.append(await sealLeafHash(statement(i)));
    const later = parseCheckpoint((parseNote(await signCheckpoint(tree.size, await tree.root(), signer)) as { text: string }).text);
    const older = parseCheckpoint((parseNote(note) as { text: string }).text);
    expect(await verifyCheckpointConsistency(older, later, (await tree.consistencyProof(7)).map(toBase64))).toEqual({ ok: true, grew: 5 });
    expect(await verifyCheckpointConsistency(older, older, [])).toEqual({ ok: true, grew: 0 });
  });

  it('names each way a proof fails', async () => {
    const { signer } = await generateSigner('cairn/test-log');
    const trusted = [await verifierOf(signer)];
    const { tree, note } = await logOf(9, signer);
    const good = await proofOf(tree, 4, note);
    const reason = async (s: SealStatement, p: InclusionProofFields, keys = trusted) => {
      const checked = await verifySealInclusion(s, p, keys);
      return checked.ok ? 'ok' : checked.reason;
    };
    // A changed leaf: another statement under this chain's name.
    expect(await reason({ ...statement(4), finalState: 'FAILED', errorCode: 'E_TIMEOUT' }, good)).toBe('leaf_mismatch');
    // Another chain's seal with this chain's proof.
    expect(await reason(statement(5), good)).toBe('proof_chain_mismatch');
    const flipped = fromBase64(good.hashes[0]!);
    flipped[0] = flipped[0]! ^ 1;
    expect(await reason(statement(4), { ...good, hashes: [toBase64(flipped), ...good.hashes.slice(1)] })).toBe('inclusion_invalid');
    expect(await reason(statement(4), { ...good, leafIndex: 5 })).toBe('inclusion_invalid');
    expect(await reason(statement(4), { ...good, treeSize: 8 })).toBe('tree_size_mismatch');
    expect(await reason(statement(4), { ...good, hashes: ['not base64'] })).toBe('proof_malformed');
    // A forged checkpoint signature, a checkpoint by a key nobody trusts, one signed under another origin.
    const lines = note.split('\n');
    const sig = lines.at(-2)!;
    const raw = fromBase64(sig.slice(sig.lastIndexOf(' ') + 1));
    raw[10] = raw[10]! ^ 1;
    const forged = [...lines.slice(0, -2), `${sig.slice(0, sig.lastIndexOf(' ') + 1)}${toBase64(raw)}`, ''].join('\n');
    expect(await reason(statement(4), { ...good, checkpoint: forged })).toBe('checkpoint_signature_invalid');
    const { signer: stranger } = await generateSigner('cairn/test-log');
    expect(await reason(statement(4), good, [await verifierOf(stranger)])).toBe('checkpoint_key_unknown');
    const { signer: other } = await generateSigner('cairn/other');
    const foreign = note.replace('cairn/test-log\n', 'cairn/elsewhere\n');
    expect(await reason(statement(4), { ...good, checkpoint: foreign })).toBe('checkpoint_signature_invalid');
    // Signed by a trusted key, but naming another log as its origin.
    const misnamed = await signNote(formatCheckpoint({ origin: 'cairn/test-log', size: 9, rootHash: await tree.root() }), [other]);
    expect(await verifyCheckpointNote(misnamed, [await verifierOf(other)])).toMatchObject({ ok: false, reason: 'checkpoint_origin_mismatch' });
    expect(await verifyCheckpointNote('no note', trusted)).toMatchObject({ ok: false, reason: 'checkpoint_malformed' });
  });

  it('detects a rolled-back log, a fork of the same size and a tree that does not extend the old one', async () => {
    const { signer } = await generateSigner('cairn/test-log');
    const { tree } = await logOf(6, signer);
    const at = async (t: MerkleTree, size: number) => ({ origin: 'cairn/test-log', size, rootHash: await t.root(size), extensions: [] });
    const older = await at(tree, 6);
    const forkTree = new MerkleTree();
    for (let i = 0; i < 8; i++) await forkTree.append(await sealLeafHash(statement(i === 2 ? 99 : i)));
    const reason = async (a: Awaited<ReturnType<typeof at>>, b: Awaited<ReturnType<typeof at>>, hashes: string[]) => {
      const checked = await verifyCheckpointConsistency(a, b, hashes);
      return checked.ok ? 'ok' : checked.reason;
    };
    expect(await reason(older, await at(tree, 4), [])).toBe('log_rolled_back');
    expect(await reason(older, await at(forkTree, 6), [])).toBe('checkpoint_inconsistent');
    expect(await reason(older, await at(forkTree, 8), (await forkTree.consistencyProof(6)).map(toBase64))).toBe('checkpoint_inconsistent');
    expect(await reason(older, { ...(await at(tree, 6)), origin: 'cairn/other' }, [])).toBe('checkpoint_origin_mismatch');
  });
});
