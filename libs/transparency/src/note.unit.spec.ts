import { describe, expect, it } from 'vitest';
import { fromHex, toBase64, utf8 } from './bytes.js';
import { formatCheckpoint, parseCheckpoint } from './checkpoint.js';
import { leafHash, rootHash } from './merkle.js';
import { formatVerifierKey, generateSigner, keyIdHex, openNote, parseNote, parseSignerKey, parseVerifierKey, signNote } from './note.js';

/*
 * Known answers from golang.org/x/mod/sumdb/note (BSD-3-Clause), note_test.go: the PeterNeumann
 * and EnochRoot keys, the signed note of TestSign and the signatures of TestOpen; and the
 * examples of c2sp.org/signed-note and c2sp.org/tlog-checkpoint (C2SP/C2SP, CC BY 4.0).
 */

const PETER_SIGNER = 'PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz';
const PETER = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';
const ENOCH = 'EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop';
const TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
const PETER_SIG = '— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n';
const ENOCH_SIG = '— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n';

describe('signed notes (golang.org/x/mod/sumdb/note note_test.go)', () => {
  it('derives the verifier key and key id of the PeterNeumann signer key', async () => {
    const signer = await parseSignerKey(PETER_SIGNER);
    expect(keyIdHex(signer.keyId)).toBe('c74f20a3');
    expect(await formatVerifierKey(signer.name, signer.publicKey)).toBe(PETER);
  });

  it('signs the TestSign note byte for byte (Ed25519 is deterministic)', async () => {
    expect(await signNote(TEXT, [await parseSignerKey(PETER_SIGNER)])).toBe(`${TEXT}\n${PETER_SIG}`);
  });

  it('opens TestOpen: one known signature verified, the unknown one kept aside', async () => {
    const opened = await openNote(`${TEXT}\n${PETER_SIG}${ENOCH_SIG}`, [await parseVerifierKey(PETER)]);
    expect(opened.ok).toBe(true);
    if (!opened.ok) return;
    expect(opened.text).toBe(TEXT);
    expect(opened.verified.map((s) => [s.name, keyIdHex(s.keyId)])).toEqual([['PeterNeumann', 'c74f20a3']]);
    expect(opened.unverified.map((s) => [s.name, keyIdHex(s.keyId)])).toEqual([['EnochRoot', 'af0cfe78']]);
    const both = await openNote(`${TEXT}\n${PETER_SIG}${ENOCH_SIG}`, [await parseVerifierKey(PETER), await parseVerifierKey(ENOCH)]);
    expect(both.ok && both.verified.length).toBe(2);
  });

  it('refuses a note no known key signed, and one whose known signature fails', async () => {
    expect(await openNote(`${TEXT}\n${PETER_SIG}${ENOCH_SIG}`, [])).toMatchObject({ ok: false, reason: 'no_known_signature' });
    const forged = `${TEXT}\n${PETER_SIG.slice(0, 60)}ABCD${PETER_SIG.slice(60)}`;
    expect(await openNote(forged, [await parseVerifierKey(PETER)])).toMatchObject({ ok: false, reason: 'invalid_signature', message: 'invalid signature for key PeterNeumann+c74f20a3' });
    const changed = `${TEXT.replace('cryptography', 'cryptographY')}\n${PETER_SIG}`;
    expect(await openNote(changed, [await parseVerifierKey(PETER)])).toMatchObject({ ok: false, reason: 'invalid_signature' });
    const peter = await parseVerifierKey(PETER);
    expect(await openNote(`${TEXT}\n${PETER_SIG}`, [peter, peter])).toMatchObject({ ok: false, reason: 'ambiguous_key' });
  });

  it.each([
    ['no signature block', TEXT],
    ['a blank line and nothing', `${TEXT}\n`],
    ['no final newline', `${TEXT}\n${PETER_SIG.slice(0, -1)}`],
    ['a control character', `\u0001${TEXT}\n${PETER_SIG}`],
    ['a name with a space', `${TEXT}\n— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n`],
    ['a line after the signatures', `${TEXT}\n${PETER_SIG}Unexpected line.\n`],
    ['too many signatures', `${TEXT}\n${PETER_SIG.repeat(101)}`],
  ])('refuses a malformed note (TestOpen badMsgs): %s', (_what, message) => {
    expect(parseNote(message).ok).toBe(false);
  });

  it('refuses mangled verifier keys (TestNewVerifier)', async () => {
    for (const bad of [
      'PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==',
      'PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW',
      PETER.replace('c74f20a3', 'c74f20a4'),
      PETER.replace('Peter', 'Petra'),
      PETER.slice(0, -1),
      PETER.slice(1),
    ]) {
      await expect(parseVerifierKey(bad)).rejects.toMatchObject({ code: 'E_INPUT' });
    }
    await expect(parseSignerKey(PETER_SIGNER.replace('c74f20a3', 'c74f20a4'))).rejects.toMatchObject({ code: 'E_INPUT' });
  });

  it('parses the c2sp.org/signed-note example into its text and signature', () => {
    const example =
      'Ognuno sta solo sul cuor della terra\ntrafitto da un raggio di sole:\n\ned è subito sera.\n\n— quasimodo.example/salvatore NnugSzTjtVAewIS+Z/iJhUPeFDkO/5QQ2i5ddnGITLlC+EhfLW9oJKONrMouFSQU0xMcXxj99ihAQwaqP3ZekRwNtIc=\n';
    const parsed = parseNote(example);
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.text).toBe('Ognuno sta solo sul cuor della terra\ntrafitto da un raggio di sole:\n\ned è subito sera.\n');
    expect(parsed.signatures).toHaveLength(1);
    expect(parsed.signatures[0]!.name).toBe('quasimodo.example/salvatore');
    expect(keyIdHex(parsed.signatures[0]!.keyId)).toBe('367ba04b');
  });

  it('signs and opens with a generated key, and not with another', async () => {
    const { signer } = await generateSigner('cairn.test/seal');
    const other = await generateSigner('cairn.test/seal');
    const note = await signNote('hello\n', [signer]);
    expect((await openNote(note, [await parseVerifierKey(await formatVerifierKey(signer.name, signer.publicKey))])).ok).toBe(true);
    // Same name, another key: a different id, so the signature is unknown to it, not failed.
    expect(await openNote(note, [await parseVerifierKey(await formatVerifierKey(other.signer.name, other.signer.publicKey))])).toMatchObject({ ok: false, reason: 'no_known_signature' });
  });
});

describe('checkpoints (c2sp.org/tlog-checkpoint)', () => {
  const EXAMPLE = 'example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n';

  it('parses the spec example and writes it back byte for byte', () => {
    const checkpoint = parseCheckpoint(EXAMPLE);
    expect(checkpoint.origin).toBe('example.com/behind-the-sofa');
    expect(checkpoint.size).toBe(20852163);
    expect(toBase64(checkpoint.rootHash)).toBe('CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=');
    expect(checkpoint.extensions).toEqual([]);
    expect(formatCheckpoint(checkpoint)).toBe(EXAMPLE);
    const signed = parseNote(`${EXAMPLE}\n— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n`);
    expect(signed.ok && signed.text).toBe(EXAMPLE);
  });

  it('writes the empty tree and extension lines', async () => {
    const empty = formatCheckpoint({ origin: 'cairn.test/log', size: 0, rootHash: await rootHash([]) });
    expect(empty).toBe('cairn.test/log\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n');
    expect(formatCheckpoint({ origin: 'o', size: 1, rootHash: fromHex('6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d'), extensions: ['x y'] })).toBe(
      'o\n1\nbjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=\nx y\n',
    );
    expect(parseCheckpoint('o\n1\nbjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=\nx y\n').extensions).toEqual(['x y']);
  });

  it.each([
    ['no final newline', EXAMPLE.slice(0, -1)],
    ['two lines', 'o\n1\n'],
    ['an empty origin', '\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n'],
    ['a leading zero', 'o\n01\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n'],
    ['a negative size', 'o\n-1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n'],
    ['a short root', 'o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2=\n'],
    ['unpadded base64', 'o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I\n'],
    ['an empty extension line', `${EXAMPLE}\n`],
  ])('refuses %s', (_what, text) => {
    expect(() => parseCheckpoint(text)).toThrow(expect.objectContaining({ code: 'E_INPUT' }) as Error);
  });

  it('signs a checkpoint as a note its verifier key opens', async () => {
    const { signer } = await generateSigner('cairn.test/log');
    const body = formatCheckpoint({ origin: 'cairn.test/log', size: 1, rootHash: await rootHash([await leafHash(utf8('x'))]) });
    const opened = await openNote(await signNote(body, [signer]), [await parseVerifierKey(await formatVerifierKey(signer.name, signer.publicKey))]);
    expect(opened.ok && parseCheckpoint(opened.text).size).toBe(1);
  });
});
