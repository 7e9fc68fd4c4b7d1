import { readFile } from 'node:fs/promises';
import { CairnError, TlogConsistencyProofSchema, TlogInclusionProofSchema } from '@cairn/contracts';
import type { TlogConsistencyProof } from '@cairn/contracts';
import { sealOfReceipt, verifyCheckpointConsistency, verifyCheckpointNote, verifySealInclusion } from '@cairn/transparency';
import type { Checkpoint, LogProofFailure, NoteVerifier } from '@cairn/transparency';
import { usageError } from './exit-codes.js';

/*
 * The log checks of `cairn verify` (docs/proofs.md): a cairn.bundle/v2's seal inclusion in the
 * checkpoint it carries, and the consistency of two checkpoints — offline, against pinned keys.
 * Every failure is E_CHAIN_BROKEN with the reason @cairn/transparency names, so a script can tell
 * a changed leaf from a swapped chain, a forged checkpoint, a fork and a rollback.
 */

export type LogCheck =
  | { status: 'included'; leafIndex: number; treeSize: number; key: string }
  | { status: 'unchecked'; leafIndex: number; treeSize: number }
  | { status: 'no_proof' };

function broken(reason: LogProofFailure | 'bundle_signature_mismatch', message: string, details: Record<string, unknown> = {}): CairnError {
  return new CairnError('E_CHAIN_BROKEN', message, { reason, ...details });
}

/**
 * A v2 bundle's log proof, after its chain and seal signature verified: the signature it names
 * is the seal's, the proof is this seal's leaf, and the checkpoint is signed by a trusted key.
 */
export async function checkBundleLog(document: Record<string, unknown>, last: unknown, trusted: readonly NoteVerifier[]): Promise<LogCheck> {
  const parsed = TlogInclusionProofSchema.safeParse(document.inclusion);
  if (!parsed.success) throw broken('proof_malformed', `the bundle's inclusion proof is not one: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  const proof = parsed.data;
  const seal = sealOfReceipt(last);
  if (seal.kind !== 'signed') throw broken('bundle_signature_mismatch', 'a cairn.bundle/v2 proves a signed seal, and this chain does not end in one');
  const named = document.sealSignature as Record<string, unknown> | undefined;
  if (named?.key_name !== seal.fields.key_name || named.key_id !== seal.fields.key_id || named.signature !== seal.fields.signature) {
    throw broken('bundle_signature_mismatch', "the bundle's sealSignature is not the signature its seal receipt carries");
  }
  if (trusted.length === 0) return { status: 'unchecked', leafIndex: proof.leafIndex, treeSize: proof.treeSize };
  const checked = await verifySealInclusion(seal.statement, proof, trusted);
  if (!checked.ok) throw broken(checked.reason, `the seal's inclusion in the log does not hold: ${checked.message}`, { leafIndex: proof.leafIndex, treeSize: proof.treeSize });
  return { status: 'included', leafIndex: checked.leafIndex, treeSize: checked.checkpoint.size, key: checked.key };
}

export function formatLogCheck(check: LogCheck, format: string): { human: string; machine: Record<string, unknown> } {
  switch (check.status) {
    case 'included':
      return {
        human: `in the log: leaf ${check.leafIndex} of ${check.treeSize}, checkpoint signed by ${check.key}: verified`,
        machine: { log: { included: true, verified: true, leafIndex: check.leafIndex, treeSize: check.treeSize, key: check.key } },
      };
    case 'unchecked':
      return {
        human: `in the log: leaf ${check.leafIndex} of ${check.treeSize}: not checked (give --key or --trust-file)`,
        machine: { log: { included: true, verified: false, leafIndex: check.leafIndex, treeSize: check.treeSize } },
      };
    case 'no_proof':
      return {
        human: `${format}: no inclusion proof — the chain and its signature are checked, not that this seal is the one in the deployment's log (export a cairn.bundle/v2 for that)`,
        machine: { log: null },
      };
  }
}

/** A checkpoint file: the signed note as served (`GET /v1/tlog/checkpoint` → `.checkpoint`, or a watch state file). */
export async function readCheckpointFile(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw usageError(`cannot read the checkpoint ${path}: ${(error as { code?: string }).code ?? 'unreadable'}`, { path });
  }
}

/** A checkpoint note opened with trusted keys, or E_CHAIN_BROKEN naming why not. */
export async function openCheckpoint(note: string, trusted: readonly NoteVerifier[], what: string): Promise<{ checkpoint: Checkpoint; key: string }> {
  if (trusted.length === 0) throw usageError('a checkpoint is checked against a pinned key: give --key or --trust-file');
  const opened = await verifyCheckpointNote(note, trusted);
  if (!opened.ok) throw broken(opened.reason, `${what}: ${opened.message}`);
  return { checkpoint: opened.checkpoint, key: opened.key };
}

/** A consistency proof file (the JSON `GET /v1/tlog/proof/consistency` answers). */
export async function readConsistencyProofFile(path: string): Promise<TlogConsistencyProof> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(path, 'utf8'));
  } catch (error) {
    throw usageError(`cannot read the consistency proof ${path}: ${error instanceof SyntaxError ? 'not JSON' : ((error as { code?: string }).code ?? 'unreadable')}`, { path });
  }
  const parsed = TlogConsistencyProofSchema.safeParse(value);
  if (!parsed.success) throw usageError(`${path} is not a consistency proof ({ from, to, hashes })`, { path });
  return parsed.data;
}

export interface ConsistencyOutcome {
  older: Checkpoint;
  newer: Checkpoint;
  key: string;
  grew: number;
}

/**
 * That `newerNote` extends `olderNote`: both signed by a trusted key, of one log, the newer not
 * smaller (else a rollback), and `proof` (fetched by the caller, for those two sizes) consistent.
 */
export async function checkConsistency(
  olderNote: string,
  newerNote: string,
  trusted: readonly NoteVerifier[],
  proofFor: (from: number, to: number) => Promise<TlogConsistencyProof>,
): Promise<ConsistencyOutcome> {
  const older = await openCheckpoint(olderNote, trusted, 'the older checkpoint');
  const newer = await openCheckpoint(newerNote, trusted, 'the newer checkpoint');
  const sizes = { from: older.checkpoint.size, to: newer.checkpoint.size };
  let hashes: readonly string[] = [];
  if (newer.checkpoint.size > older.checkpoint.size && older.checkpoint.size > 0) {
    const proof = await proofFor(older.checkpoint.size, newer.checkpoint.size);
    if (proof.from !== older.checkpoint.size || proof.to !== newer.checkpoint.size) {
      throw broken('proof_malformed', `the consistency proof is from ${proof.from} to ${proof.to}, not ${older.checkpoint.size} to ${newer.checkpoint.size}`, sizes);
    }
    hashes = proof.hashes;
  }
  const checked = await verifyCheckpointConsistency(older.checkpoint, newer.checkpoint, hashes);
  if (!checked.ok) throw broken(checked.reason, checked.message, sizes);
  return { older: older.checkpoint, newer: newer.checkpoint, key: newer.key, grew: checked.grew };
}

