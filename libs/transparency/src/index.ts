export { bytesEqual, concatBytes, fromBase64, fromHex, sha256, toBase64, toHex, utf8 } from './bytes.js';
export type { Bytes } from './bytes.js';
export { consistencyProof, HASH_SIZE, inclusionProof, leafHash, nodeHash, rootFromInclusionProof, rootHash, verifyConsistency, verifyInclusion } from './merkle.js';
export {
  describeKey,
  ed25519KeyId,
  formatNote,
  formatSignerKey,
  formatVerifierKey,
  generateSigner,
  isKeyName,
  keyIdHex,
  MAX_NOTE_SIGNATURES,
  openNote,
  parseNote,
  parseSignerKey,
  parseVerifierKey,
  signerFromSeed,
  signNote,
  signNoteText,
} from './note.js';
export type { NoteCheck, NoteParse, NoteSignature, NoteSigner, NoteVerifier } from './note.js';
export { formatCheckpoint, parseCheckpoint, signCheckpoint } from './checkpoint.js';
export { MerkleTree } from './merkle-tree.js';
export type { TreeHasher } from './merkle-tree.js';
export { checkInclusionPath, checkSealLeaf, sealLeafHash, verifyCheckpointConsistency, verifyCheckpointNote, verifySealInclusion } from './log-proof.js';
export { checkSealProofs, inclusionProofFields } from './seal-proofs.js';
export type { ProofLine, SealProofFailure, SealProofReport } from './seal-proofs.js';
export type { InclusionProofFields, LogCheck, LogProofFailure, VerifiedCheckpoint } from './log-proof.js';
export type { Checkpoint } from './checkpoint.js';
export { SEAL_STATEMENT_HEADER, sealNote, sealOfReceipt, sealStatementText, signSealStatement, verifySealSignature } from './seal-statement.js';
export type { SealOfReceipt, SealSignatureCheck, SealSignatureFields, SealStatement } from './seal-statement.js';
