import { z } from 'zod';
import { WorkChainIdSchema } from '../envelope.js';
import { SealSignatureSchema, VerifierKeySchema } from '../seal-signature.schema.js';
import type { SealSignature } from '../seal-signature.schema.js';
import { ProofBundleSchema } from './api.schema.js';
import type { ProofBundle } from './api.schema.js';

/*
 * The log of seal heads (docs/proofs.md, ADR 0020): its signed checkpoints (c2sp.org/tlog-checkpoint
 * bodies in c2sp.org/signed-note notes), inclusion proofs of a sealed chain's leaf and consistency
 * proofs between two tree sizes (RFC 9162 §2.1.3, §2.1.4), hashes in standard base64 as the
 * checkpoint writes its root — and the proof bundle that carries them, cairn.bundle/v2.
 */

/** base64 of a SHA-256 (32 bytes, padded). */
export const Base64HashSchema = z.string().regex(/^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/, 'base64 of a 32-byte hash');
const TreeSizeSchema = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
/** A proof has one hash per tree level at most (two per level for consistency): 2^53 leaves need fewer than 110. */
const ProofHashesSchema = z.array(Base64HashSchema).max(128);
/** A signed checkpoint note, as signed: what `cairn verify --checkpoint` and `cairn checkpoints watch` keep. */
export const SignedCheckpointSchema = z.string().min(1).max(16 * 1024);

export const TlogCheckpointSchema = z.strictObject({
  /** The signed note: origin line (the key name), tree size, base64 root, a blank line, the signature line. */
  checkpoint: SignedCheckpointSchema,
  origin: z.string().min(1),
  size: TreeSizeSchema,
  rootHash: Base64HashSchema,
});
export type TlogCheckpoint = z.infer<typeof TlogCheckpointSchema>;

export const TlogInclusionQuerySchema = z.strictObject({ chain: WorkChainIdSchema });
export type TlogInclusionQuery = z.infer<typeof TlogInclusionQuerySchema>;

export const TlogInclusionProofSchema = z.strictObject({
  chainId: WorkChainIdSchema,
  /** The chain's leaf: its index is its stream seq minus one. */
  leafIndex: TreeSizeSchema,
  /** The tree the proof is for: the checkpoint's size. */
  treeSize: TreeSizeSchema,
  /** H(0x00 ‖ the seal statement): a verifier rebuilds the statement from the seal and compares. */
  leafHash: Base64HashSchema,
  hashes: ProofHashesSchema,
  /** The signed checkpoint whose root the proof leads to. */
  checkpoint: SignedCheckpointSchema,
});
export type TlogInclusionProof = z.infer<typeof TlogInclusionProofSchema>;

const QuerySize = z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
export const TlogConsistencyQuerySchema = z.strictObject({ from: QuerySize, to: QuerySize });
export type TlogConsistencyQuery = z.infer<typeof TlogConsistencyQuerySchema>;

export const TlogConsistencyProofSchema = z.strictObject({
  from: TreeSizeSchema,
  to: TreeSizeSchema,
  hashes: ProofHashesSchema,
});
export type TlogConsistencyProof = z.infer<typeof TlogConsistencyProofSchema>;

export const BUNDLE_V2_FORMAT = 'cairn.bundle/v2';

/**
 * A proof bundle that proves who sealed the chain and that the seal is in the deployment's log:
 * v1's content, the seal's signature (as the seal receipt carries it), the seal's inclusion proof
 * with its signed checkpoint, and the public keys the deployment published when it was written —
 * shown, never trusted: a verifier checks against keys it pinned.
 */
export const ProofBundleV2Schema = ProofBundleSchema.extend({
  format: z.literal(BUNDLE_V2_FORMAT),
  sealSignature: SealSignatureSchema,
  inclusion: TlogInclusionProofSchema,
  sealKeys: z.array(VerifierKeySchema),
});
export type ProofBundleV2 = Omit<ProofBundle, 'format'> & {
  format: typeof BUNDLE_V2_FORMAT;
  sealSignature: SealSignature;
  inclusion: TlogInclusionProof;
  sealKeys: string[];
};
