import { z } from 'zod';

/*
 * A seal's signature and the deployment's public keys (docs/proofs.md, ADR 0017). The signature
 * is a c2sp.org/signed-note Ed25519 signature over the seal statement (@cairn/transparency):
 * the key name and key id name the key, `signature` is the signature line's base64.
 */

/** A signed-note key name: no Unicode space and no "+". */
export const SealKeyNameSchema = z.string().min(1).max(128).regex(/^[^\s+]+$/u, 'a key name has no space and no "+"');
/** The C2SP key id: SHA-256(name ‖ "\n" ‖ 0x01 ‖ public key)[:4], as 8 lower-case hex digits. */
export const SealKeyIdSchema = z.string().regex(/^[0-9a-f]{8}$/, 'a key id is 8 lower-case hex digits');

export const SealSignatureSchema = z.strictObject({
  key_name: SealKeyNameSchema,
  key_id: SealKeyIdSchema,
  /** base64(key id ‖ 64-byte Ed25519 signature): 68 bytes, 92 characters. */
  signature: z.string().regex(/^[A-Za-z0-9+/]{91}=$/, 'base64 of a 4-byte key id and a 64-byte Ed25519 signature'),
});
export type SealSignature = z.infer<typeof SealSignatureSchema>;

/** `<name>+<hex key id>+base64(0x01 ‖ 32-byte Ed25519 public key)`, as golang.org/x/mod/sumdb/note writes a verifier key. */
export const VerifierKeySchema = z.string().regex(/^[^\s+]{1,128}\+[0-9a-f]{8}\+[A-Za-z0-9+/]{44}$/, 'a verifier key <name>+<hex id>+<base64 key>');

export const SealKeySchema = z.strictObject({
  /** The verifier key, for `cairn verify --key` or a trust file. */
  key: VerifierKeySchema,
  name: SealKeyNameSchema,
  keyId: SealKeyIdSchema,
  /** `current` signs new seals; a `retired` key signed older ones and still verifies them. */
  status: z.enum(['current', 'retired']),
});
export type SealKey = z.infer<typeof SealKeySchema>;

export const SealKeysSchema = z.strictObject({ keys: z.array(SealKeySchema) });
export type SealKeys = z.infer<typeof SealKeysSchema>;
