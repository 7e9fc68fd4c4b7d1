import { describe, expect, it } from 'vitest';
import { formatVerifierKey, generateSigner, openNote, parseSignerKey, parseVerifierKey } from './note.js';
import { sealNote, sealStatementText, signSealStatement, verifySealSignature } from './seal-statement.js';
import type { SealStatement } from './seal-statement.js';

const STATEMENT: SealStatement = {
  chainId: 'run_01jdemo',
  headSeq: 17,
  headHash: 'a'.repeat(64),
  evidenceDigest: 'a'.repeat(64),
  finalState: 'FAILED',
  errorCode: 'E_TIMEOUT',
};

describe('seal statements', () => {
  it('writes the statement as five lines a person can read', () => {
    expect(sealStatementText(STATEMENT)).toBe(`cairn.seal/v1\nchain run_01jdemo\nhead 17 ${'a'.repeat(64)}\ndigest ${'a'.repeat(64)}\nstate FAILED E_TIMEOUT\n`);
    expect(sealStatementText({ ...STATEMENT, finalState: 'SEALED', errorCode: undefined }).endsWith('state SEALED\n')).toBe(true);
  });

  it('signs a seal whose note any signed-note verifier opens (a fixed key gives a fixed signature)', async () => {
    const signer = await parseSignerKey('PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz');
    const fields = await signSealStatement(STATEMENT, signer);
    expect(fields.key_name).toBe('PeterNeumann');
    expect(fields.key_id).toBe('c74f20a3');
    expect(await signSealStatement(STATEMENT, signer)).toEqual(fields);
    const verifier = await parseVerifierKey('PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW');
    expect((await openNote(sealNote(STATEMENT, fields), [verifier])).ok).toBe(true);
    expect(await verifySealSignature(STATEMENT, fields, [verifier])).toEqual({ ok: true, key: 'PeterNeumann+c74f20a3' });
  });

  it('detects each changed field, a forged signature, an unknown key and a lying key id', async () => {
    const { signer } = await generateSigner('cairn.test/seal');
    const trusted = [await parseVerifierKey(await formatVerifierKey(signer.name, signer.publicKey))];
    const fields = await signSealStatement(STATEMENT, signer);
    for (const changed of [
      { ...STATEMENT, chainId: 'run_other' },
      { ...STATEMENT, headSeq: 16 },
      { ...STATEMENT, headHash: 'b'.repeat(64) },
      { ...STATEMENT, evidenceDigest: 'b'.repeat(64) },
      { ...STATEMENT, finalState: 'SEALED', errorCode: undefined },
    ]) {
      expect(await verifySealSignature(changed, fields, trusted)).toMatchObject({ ok: false, reason: 'invalid_signature' });
    }
    const raw = Uint8Array.from(atob(fields.signature), (c) => c.charCodeAt(0));
    raw[10]! ^= 1;
    const forged = { ...fields, signature: btoa(String.fromCharCode(...raw)) };
    expect(await verifySealSignature(STATEMENT, forged, trusted)).toMatchObject({ ok: false, reason: 'invalid_signature' });
    const stranger = await generateSigner('cairn.test/seal');
    expect(await verifySealSignature(STATEMENT, await signSealStatement(STATEMENT, stranger.signer), trusted)).toMatchObject({ ok: false, reason: 'unknown_key' });
    expect(await verifySealSignature(STATEMENT, { ...fields, key_id: '00000000' }, trusted)).toMatchObject({ ok: false, reason: 'key_id_mismatch' });
    expect(await verifySealSignature(STATEMENT, { ...fields, signature: 'AAAA' }, trusted)).toMatchObject({ ok: false, reason: 'malformed' });
  });
});
