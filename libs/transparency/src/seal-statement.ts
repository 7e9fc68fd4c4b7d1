import { CairnError } from '@cairn/contracts';
import { fromBase64 } from './bytes.js';
import { formatNote, keyIdHex, openNote, signNoteText } from './note.js';
import type { NoteSigner, NoteVerifier } from './note.js';

/*
 * What a seal's signature covers: a signed note (./note.ts) whose text names the chain, the head
 * the seal covers (its seq and hash: the seal receipt's prev_hash), the evidence digest and the
 * final state with its error code. The seal receipt carries the signature line's parts, so anyone
 * can rebuild the note from the receipt and check it with any c2sp.org/signed-note verifier.
 */

export const SEAL_STATEMENT_HEADER = 'cairn.seal/v1';

export interface SealStatement {
  chainId: string;
  /** The seq of the last receipt before the seal. */
  headSeq: number;
  /** Its hash: the seal receipt's prev_hash. */
  headHash: string;
  evidenceDigest: string;
  finalState: string;
  errorCode?: string | undefined;
}

/** The signature as the seal receipt carries it (snake_case, part of the hashed body). */
export interface SealSignatureFields {
  key_name: string;
  /** 8 lower-case hex digits: the C2SP key id. */
  key_id: string;
  /** base64(key id ‖ Ed25519 signature): the signature line's second field. */
  signature: string;
}

const TOKEN = /^[A-Za-z0-9_.:-]+$/;
const HEX64 = /^[0-9a-f]{64}$/;

export function sealStatementText(statement: SealStatement): string {
  const { chainId, headSeq, headHash, evidenceDigest, finalState, errorCode } = statement;
  if (!TOKEN.test(chainId) || !TOKEN.test(finalState) || (errorCode !== undefined && !TOKEN.test(errorCode))) {
    throw new CairnError('E_INPUT', 'a seal statement names its chain, state and error code as single tokens');
  }
  if (!Number.isSafeInteger(headSeq) || headSeq < 1) throw new CairnError('E_INPUT', `a seal covers a head seq of at least 1, not ${headSeq}`);
  if (!HEX64.test(headHash) || !HEX64.test(evidenceDigest)) throw new CairnError('E_INPUT', 'a seal statement holds SHA-256 hex digests');
  return [SEAL_STATEMENT_HEADER, `chain ${chainId}`, `head ${headSeq} ${headHash}`, `digest ${evidenceDigest}`, `state ${finalState}${errorCode === undefined ? '' : ` ${errorCode}`}`]
    .map((line) => `${line}\n`)
    .join('');
}

export async function signSealStatement(statement: SealStatement, signer: NoteSigner): Promise<SealSignatureFields> {
  const signature = await signNoteText(sealStatementText(statement), signer);
  return { key_name: signature.name, key_id: keyIdHex(signature.keyId), signature: signature.base64 };
}

/** The whole signed note a seal's signature makes: what `cairn verify` checks and docs/proofs.md checks by hand. */
export function sealNote(statement: SealStatement, fields: SealSignatureFields): string {
  return formatNote(sealStatementText(statement), [{ name: fields.key_name, keyId: Number.parseInt(fields.key_id, 16), base64: fields.signature }]);
}

export type SealSignatureCheck =
  | { ok: true; key: string }
  | { ok: false; reason: 'unknown_key' | 'key_id_mismatch' | 'invalid_signature' | 'malformed'; message: string };

/** Checks a seal's signature against trusted keys (current and retired alike: rotation keeps old seals verifiable). */
export async function verifySealSignature(statement: SealStatement, fields: SealSignatureFields, trusted: readonly NoteVerifier[]): Promise<SealSignatureCheck> {
  const key = `${fields.key_name}+${fields.key_id}`;
  let raw: Uint8Array;
  let note: string;
  try {
    raw = fromBase64(fields.signature, 'the seal signature');
    note = sealNote(statement, fields);
  } catch (error) {
    return { ok: false, reason: 'malformed', message: error instanceof Error ? error.message : String(error) };
  }
  if (!/^[0-9a-f]{8}$/.test(fields.key_id) || raw.length !== 68) return { ok: false, reason: 'malformed', message: `the seal signature of ${key} is not a key id and an Ed25519 signature` };
  if (keyIdHex(new DataView(raw.buffer, raw.byteOffset).getUint32(0)) !== fields.key_id) {
    return { ok: false, reason: 'key_id_mismatch', message: `the signature's key id is not ${fields.key_id}` };
  }
  if (!trusted.some((v) => v.name === fields.key_name && keyIdHex(v.keyId) === fields.key_id)) {
    return { ok: false, reason: 'unknown_key', message: `the seal is signed by ${key}, which is not a trusted key` };
  }
  const opened = await openNote(note, trusted);
  if (!opened.ok) return { ok: false, reason: opened.reason === 'malformed' ? 'malformed' : 'invalid_signature', message: opened.message };
  return { ok: true, key };
}

export type SealOfReceipt =
  | { kind: 'signed'; statement: SealStatement; fields: SealSignatureFields }
  | { kind: 'unsigned'; statement: SealStatement }
  | { kind: 'not_sealed' };

/**
 * The statement a `run.sealed` receipt makes, rebuilt from the receipt alone (its chain, its
 * prev_hash as the head it covers at seq - 1, its digest and state), with its signature if it has one.
 */
export function sealOfReceipt(receipt: unknown): SealOfReceipt {
  if (typeof receipt !== 'object' || receipt === null) return { kind: 'not_sealed' };
  const r = receipt as Record<string, unknown>;
  if (r.type !== 'run.sealed' || typeof r.seq !== 'number' || typeof r.run_id !== 'string' || typeof r.prev_hash !== 'string') return { kind: 'not_sealed' };
  const statement: SealStatement = {
    chainId: r.run_id,
    headSeq: r.seq - 1,
    headHash: r.prev_hash,
    evidenceDigest: typeof r.evidence_digest === 'string' ? r.evidence_digest : '',
    finalState: typeof r.final_state === 'string' ? r.final_state : '',
    errorCode: typeof r.error_code === 'string' ? r.error_code : undefined,
  };
  const signature = r.signature;
  if (typeof signature !== 'object' || signature === null) return { kind: 'unsigned', statement };
  const s = signature as Record<string, unknown>;
  const text = (value: unknown) => (typeof value === 'string' ? value : '');
  return { kind: 'signed', statement, fields: { key_name: text(s.key_name), key_id: text(s.key_id), signature: text(s.signature) } };
}
