import { CairnError } from '@cairn/contracts';
import type { EvidenceReceipt } from '@cairn/contracts';
import { signSealStatement } from '@cairn/transparency';
import type { NoteSigner } from '@cairn/transparency';
import type { EventFields } from './run-seal.js';

/** The deployment's seal signer (from CAIRN_SEAL_KEY_FILE), or null when the grader was started without one. */
export const SEAL_SIGNER = Symbol('SEAL_SIGNER');

/**
 * The seal's fields with the deployment key's signature over the statement they make: the chain,
 * the head the seal is appended onto (seq and hash: the seal's prev_hash), the evidence digest and
 * the final state. Ed25519 is deterministic, so a redelivered reaction signs the same bytes.
 */
export async function signedSealFields(
  signer: NoteSigner | null,
  chainId: string,
  receipts: readonly EvidenceReceipt[],
  headSeq: number,
  fields: EventFields<'run.sealed'>,
): Promise<EventFields<'run.sealed'>> {
  if (signer === null) return fields;
  const head = receipts.at(-1);
  if (head === undefined || head.seq !== headSeq) throw new CairnError('E_INTERNAL', `sealing ${chainId} onto seq ${headSeq}, but the chain read ends at ${head?.seq ?? 0}`);
  const signature = await signSealStatement(
    { chainId, headSeq, headHash: head.hash, evidenceDigest: fields.evidence_digest, finalState: fields.final_state, errorCode: fields.error_code },
    signer,
  );
  return { ...fields, signature };
}
