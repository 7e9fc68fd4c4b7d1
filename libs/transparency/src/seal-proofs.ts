import { checkInclusionPath, checkSealLeaf, verifyCheckpointNote } from './log-proof.js';
import type { InclusionProofFields, LogProofFailure } from './log-proof.js';
import type { NoteVerifier } from './note.js';
import { sealOfReceipt, verifySealSignature } from './seal-statement.js';

/*
 * Every guarantee of a sealed chain's proofs checked on its own, for a reader that shows each one
 * (the dashboard's proof panel, docs/proofs.md): the seal's signature, the checkpoint's signature,
 * that the log's leaf is this chain's head, and that the leaf is in the checkpoint's tree. The
 * steps are the ones `cairn verify` runs (verifySealSignature, verifySealInclusion's parts); a
 * step that needs one which failed is skipped, never guessed.
 */

export type SealProofFailure = LogProofFailure | 'not_sealed' | 'seal_unsigned' | 'seal_key_unknown' | 'seal_signature_invalid' | 'bundle_signature_mismatch' | 'no_trusted_key';

export type ProofLine =
  | { status: 'verified'; message: string }
  | { status: 'failed'; reason: SealProofFailure; message: string }
  | { status: 'skipped'; message: string };

export interface SealProofReport {
  /** The seal's Ed25519 signature over its statement (chain, head, digest, state), by a trusted key. */
  signature: ProofLine;
  /** The checkpoint's signed note, by a trusted key, its origin that key's name. */
  checkpoint: ProofLine;
  /** The log's leaf is H(0x00 ‖ this seal's statement): the leaf equals the chain's head. */
  leaf: ProofLine;
  /** The RFC 6962 path leads from that leaf to the checkpoint's root. */
  inclusion: ProofLine;
  /** Every line verified. */
  ok: boolean;
}

const MAX_PROOF_HASHES = 128;
const MAX_CHECKPOINT_CHARS = 16 * 1024;

const failed = (reason: SealProofFailure, message: string): ProofLine => ({ status: 'failed', reason, message });
const skipped = (message: string): ProofLine => ({ status: 'skipped', message });

function isSize(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** An inclusion proof as the log serves it (`GET /v1/tlog/proof/inclusion`, a bundle v2's `inclusion`), or null. */
export function inclusionProofFields(value: unknown): InclusionProofFields | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const v = value as Record<string, unknown>;
  if (typeof v.chainId !== 'string' || !isSize(v.leafIndex) || !isSize(v.treeSize) || typeof v.leafHash !== 'string') return null;
  if (!Array.isArray(v.hashes) || v.hashes.length > MAX_PROOF_HASHES || !v.hashes.every((h) => typeof h === 'string')) return null;
  if (typeof v.checkpoint !== 'string' || v.checkpoint.length === 0 || v.checkpoint.length > MAX_CHECKPOINT_CHARS) return null;
  return { chainId: v.chainId, leafIndex: v.leafIndex, treeSize: v.treeSize, leafHash: v.leafHash, hashes: v.hashes, checkpoint: v.checkpoint };
}

/**
 * The proofs of the seal `seal` (the last receipt of a chain already verified) against `trusted`
 * keys: `inclusion` is its proof with the checkpoint it leads to; `sealSignature`, when the proofs
 * came in a bundle v2, is the signature the bundle names (it must be the seal's own).
 */
export async function checkSealProofs(input: { seal: unknown; inclusion: unknown; sealSignature?: unknown }, trusted: readonly NoteVerifier[]): Promise<SealProofReport> {
  const seal = sealOfReceipt(input.seal);
  const report = (lines: Omit<SealProofReport, 'ok'>): SealProofReport => ({
    ...lines,
    ok: [lines.signature, lines.checkpoint, lines.leaf, lines.inclusion].every((line) => line.status === 'verified'),
  });
  if (trusted.length === 0) {
    const none = failed('no_trusted_key', 'no trusted seal key to check against');
    return report({ signature: none, checkpoint: none, leaf: skipped('needs a trusted key'), inclusion: skipped('needs a trusted key') });
  }
  if (seal.kind === 'not_sealed') {
    const why = 'the chain does not end in a seal';
    return report({ signature: failed('not_sealed', why), checkpoint: skipped(why), leaf: skipped(why), inclusion: skipped(why) });
  }

  let signature: ProofLine;
  if (seal.kind === 'unsigned') {
    signature = failed('seal_unsigned', 'the seal is not signed: nothing says who sealed the chain');
  } else {
    const named = input.sealSignature as Record<string, unknown> | undefined;
    if (input.sealSignature !== undefined && (named?.key_name !== seal.fields.key_name || named.key_id !== seal.fields.key_id || named.signature !== seal.fields.signature)) {
      signature = failed('bundle_signature_mismatch', "the bundle's sealSignature is not the signature its seal receipt carries");
    } else {
      const checked = await verifySealSignature(seal.statement, seal.fields, trusted);
      signature = checked.ok
        ? { status: 'verified', message: `signed by ${checked.key}` }
        : failed(checked.reason === 'unknown_key' ? 'seal_key_unknown' : 'seal_signature_invalid', checked.message);
    }
  }

  const proof = inclusionProofFields(input.inclusion);
  if (proof === null) {
    const malformed = failed('proof_malformed', 'the inclusion proof is not a chain id, an index, a size, a leaf hash, hashes and a checkpoint');
    return report({ signature, checkpoint: skipped('no inclusion proof to take it from'), leaf: malformed, inclusion: skipped('no inclusion proof') });
  }
  const opened = await verifyCheckpointNote(proof.checkpoint, trusted);
  const checkpoint: ProofLine = opened.ok
    ? { status: 'verified', message: `tree of ${opened.checkpoint.size}, signed by ${opened.key}` }
    : failed(opened.reason, opened.message);
  const leafCheck = await checkSealLeaf(seal.statement, proof);
  const leaf: ProofLine = leafCheck.ok
    ? { status: 'verified', message: `leaf ${proof.leafIndex} is this seal's statement (head ${seal.statement.headSeq} ${seal.statement.headHash.slice(0, 12)}…)` }
    : failed(leafCheck.reason, leafCheck.message);
  let inclusion: ProofLine;
  if (!opened.ok) inclusion = skipped('needs a verified checkpoint');
  else if (!leafCheck.ok) inclusion = skipped("needs this seal's leaf");
  else {
    const path = await checkInclusionPath(proof, leafCheck.leaf, leafCheck.hashes, opened.checkpoint);
    inclusion = path.ok ? { status: 'verified', message: `leaf ${proof.leafIndex} of ${proof.treeSize}, ${proof.hashes.length} hashes to the root` } : failed(path.reason, path.message);
  }
  return report({ signature, checkpoint, leaf, inclusion });
}
