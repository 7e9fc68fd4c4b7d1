import { bytesEqual, fromBase64, utf8 } from './bytes.js';
import type { Bytes } from './bytes.js';
import { parseCheckpoint } from './checkpoint.js';
import type { Checkpoint } from './checkpoint.js';
import { leafHash, rootFromInclusionProof, verifyConsistency } from './merkle.js';
import { describeKey, openNote } from './note.js';
import type { NoteVerifier } from './note.js';
import { sealStatementText } from './seal-statement.js';
import type { SealStatement } from './seal-statement.js';

/*
 * What a reader checks of the log of seal heads (docs/proofs.md): a signed checkpoint (a C2SP
 * tlog-checkpoint body in a signed note whose origin is the signing key's name), a seal's inclusion
 * in the tree that checkpoint commits to (its leaf is the seal statement's text), and the
 * consistency of two checkpoints. Each failure has its own reason, so a verifier can say which
 * guarantee broke.
 */

export type LogProofFailure =
  | 'checkpoint_malformed'
  | 'checkpoint_key_unknown'
  | 'checkpoint_signature_invalid'
  | 'checkpoint_origin_mismatch'
  | 'proof_malformed'
  | 'proof_chain_mismatch'
  | 'leaf_mismatch'
  | 'tree_size_mismatch'
  | 'inclusion_invalid'
  | 'log_rolled_back'
  | 'checkpoint_inconsistent';

export type LogCheck<T> = ({ ok: true } & T) | { ok: false; reason: LogProofFailure; message: string };

/** An inclusion proof as the log serves it (hashes base64, the checkpoint a signed note). */
export interface InclusionProofFields {
  chainId: string;
  leafIndex: number;
  treeSize: number;
  /** base64 of H(0x00 ‖ seal statement). */
  leafHash: string;
  hashes: readonly string[];
  checkpoint: string;
}

export interface VerifiedCheckpoint {
  checkpoint: Checkpoint;
  /** `<name>+<key id>` of the key whose signature verified. */
  key: string;
}

/** A signed checkpoint, opened with trusted keys: its signature must verify and its origin name the signing key. */
export async function verifyCheckpointNote(note: string, trusted: readonly NoteVerifier[]): Promise<LogCheck<VerifiedCheckpoint>> {
  const opened = await openNote(note, trusted);
  if (!opened.ok) {
    const reason = opened.reason === 'malformed' ? 'checkpoint_malformed' : opened.reason === 'invalid_signature' ? 'checkpoint_signature_invalid' : 'checkpoint_key_unknown';
    return { ok: false, reason, message: `the checkpoint does not open: ${opened.message}` };
  }
  let checkpoint: Checkpoint;
  try {
    checkpoint = parseCheckpoint(opened.text);
  } catch (error) {
    return { ok: false, reason: 'checkpoint_malformed', message: error instanceof Error ? error.message : String(error) };
  }
  const signer = opened.verified.find((s) => s.name === checkpoint.origin);
  if (signer === undefined) {
    return { ok: false, reason: 'checkpoint_origin_mismatch', message: `the checkpoint's origin ${JSON.stringify(checkpoint.origin)} is not the name of a key that signed it` };
  }
  return { ok: true, checkpoint, key: describeKey(signer) };
}

function decodeHashes(hashes: readonly string[]): Bytes[] | null {
  try {
    return hashes.map((h) => fromBase64(h, 'a proof hash'));
  } catch {
    return null;
  }
}

/** The leaf a seal makes in the log: H(0x00 ‖ the seal statement's text). */
export function sealLeafHash(statement: SealStatement): Promise<Bytes> {
  return leafHash(utf8(sealStatementText(statement)));
}

/**
 * That the proof is this seal's leaf (the leaf equals the chain's head): it names this chain, it
 * is an index, a size and base64 hashes, and its leaf hash is H(0x00 ‖ this seal's statement).
 */
export async function checkSealLeaf(statement: SealStatement, proof: InclusionProofFields): Promise<LogCheck<{ leaf: Bytes; hashes: Bytes[] }>> {
  if (proof.chainId !== statement.chainId) {
    return { ok: false, reason: 'proof_chain_mismatch', message: `the inclusion proof is for ${proof.chainId}, not ${statement.chainId}` };
  }
  const hashes = decodeHashes(proof.hashes);
  let claimed: Bytes | null = null;
  try {
    claimed = fromBase64(proof.leafHash, 'the leaf hash');
  } catch {
    claimed = null;
  }
  if (hashes === null || claimed === null || !Number.isSafeInteger(proof.leafIndex) || !Number.isSafeInteger(proof.treeSize)) {
    return { ok: false, reason: 'proof_malformed', message: 'the inclusion proof is not an index, a size, a base64 leaf hash and base64 hashes' };
  }
  const leaf = await sealLeafHash(statement);
  if (!bytesEqual(leaf, claimed)) {
    return { ok: false, reason: 'leaf_mismatch', message: `the log's leaf ${proof.leafIndex} is not this seal's statement (chain, head, digest or state differ)` };
  }
  return { ok: true, leaf, hashes };
}

/** That the proof's path leads from `leaf` to the root of the (verified) checkpoint, for its size. */
export async function checkInclusionPath(proof: Pick<InclusionProofFields, 'leafIndex' | 'treeSize'>, leaf: Uint8Array, hashes: readonly Uint8Array[], checkpoint: Checkpoint): Promise<LogCheck<{ leafIndex: number }>> {
  if (proof.treeSize !== checkpoint.size) {
    return { ok: false, reason: 'tree_size_mismatch', message: `the proof is for a tree of ${proof.treeSize}, the checkpoint signs one of ${checkpoint.size}` };
  }
  const root = await rootFromInclusionProof(proof.leafIndex, proof.treeSize, leaf, hashes);
  if (root === null || !bytesEqual(root, checkpoint.rootHash)) {
    return { ok: false, reason: 'inclusion_invalid', message: `the proof does not lead from leaf ${proof.leafIndex} to the checkpoint's root of tree size ${proof.treeSize}` };
  }
  return { ok: true, leafIndex: proof.leafIndex };
}

/**
 * That the seal `statement` is leaf `leafIndex` of the tree the proof's checkpoint signs: the
 * checkpoint verified first, then the proof names this chain, its leaf is this statement, its
 * size is the checkpoint's, and its path leads to the checkpoint's root.
 */
export async function verifySealInclusion(statement: SealStatement, proof: InclusionProofFields, trusted: readonly NoteVerifier[]): Promise<LogCheck<VerifiedCheckpoint & { leafIndex: number }>> {
  const opened = await verifyCheckpointNote(proof.checkpoint, trusted);
  if (!opened.ok) return opened;
  const leaf = await checkSealLeaf(statement, proof);
  if (!leaf.ok) return leaf;
  const path = await checkInclusionPath(proof, leaf.leaf, leaf.hashes, opened.checkpoint);
  if (!path.ok) return path;
  return { ok: true, checkpoint: opened.checkpoint, key: opened.key, leafIndex: path.leafIndex };
}

/**
 * That `newer` extends `older` (both verified checkpoints of one log): a smaller tree is a
 * rollback, the same size must be the same root, a larger one needs a consistency proof.
 */
export async function verifyCheckpointConsistency(older: Checkpoint, newer: Checkpoint, hashes: readonly string[]): Promise<LogCheck<{ grew: number }>> {
  if (older.origin !== newer.origin) {
    return { ok: false, reason: 'checkpoint_origin_mismatch', message: `the checkpoints are of two logs: ${JSON.stringify(older.origin)} and ${JSON.stringify(newer.origin)}` };
  }
  if (newer.size < older.size) {
    return { ok: false, reason: 'log_rolled_back', message: `the log was rolled back: it had ${older.size} leaves, it now shows ${newer.size}` };
  }
  const decoded = decodeHashes(hashes);
  if (decoded === null) return { ok: false, reason: 'proof_malformed', message: 'the consistency proof is not base64 hashes' };
  if (!(await verifyConsistency(older.size, newer.size, decoded, older.rootHash, newer.rootHash))) {
    const what = newer.size === older.size ? `two different roots for the same ${older.size} leaves` : `a tree of ${newer.size} that does not extend the ${older.size} seen before`;
    return { ok: false, reason: 'checkpoint_inconsistent', message: `the log forked: ${what}` };
  }
  return { ok: true, grew: newer.size - older.size };
}
