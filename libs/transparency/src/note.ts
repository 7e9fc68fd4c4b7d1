import { CairnError } from '@cairn/contracts';
import { concatBytes, fromBase64, sha256, toBase64, utf8 } from './bytes.js';
import type { Bytes } from './bytes.js';

/*
 * C2SP signed notes (c2sp.org/signed-note) with Ed25519 signatures, through WebCrypto so the same
 * code verifies in a browser. A note is text ending in "\n", a blank line, and signature lines
 * "— <key name> base64(key id ‖ signature)". The key id is the first four bytes of
 * SHA-256(key name ‖ 0x0A ‖ 0x01 ‖ public key), big-endian. Keys are written as
 * golang.org/x/mod/sumdb/note writes them: a verifier key `<name>+<hex id>+base64(0x01 ‖ public
 * key)`, a signer key `PRIVATE+KEY+<name>+<hex id>+base64(0x01 ‖ seed)`.
 */

const ED25519 = 0x01;
const ALGORITHM = { name: 'Ed25519' } as const;
/** PKCS #8 wrapping of a raw 32-byte Ed25519 seed (RFC 8410): WebCrypto imports private keys only so. */
const PKCS8_PREFIX = new Uint8Array([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]);
/** The em dash and space that open a signature line. */
const SIGNATURE_PREFIX = '\u2014 ';
/** The spec asks verifiers to take at least 16; a note with more is refused. */
export const MAX_NOTE_SIGNATURES = 100;

export interface NoteVerifier {
  name: string;
  /** The uint32 key id. */
  keyId: number;
  publicKey: Bytes;
  verify(message: Bytes, signature: Uint8Array): Promise<boolean>;
}

export interface NoteSigner {
  name: string;
  keyId: number;
  publicKey: Bytes;
  sign(message: Bytes): Promise<Bytes>;
}

export interface NoteSignature {
  name: string;
  keyId: number;
  /** The base64 on the signature line: key id ‖ signature. */
  base64: string;
}

/** A key name: non-empty, no Unicode space, no "+" (c2sp.org/signed-note). */
export function isKeyName(name: string): boolean {
  return name.length > 0 && !/[\s+]/u.test(name) && !hasControl(name);
}

function hasControl(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 && code !== 0x0a) return true;
  }
  return false;
}

export function keyIdHex(keyId: number): string {
  return keyId.toString(16).padStart(8, '0');
}

/** key ID = SHA-256(key name ‖ 0x0A ‖ 0x01 ‖ 32-byte public key)[:4], big-endian. */
export async function ed25519KeyId(name: string, publicKey: Uint8Array): Promise<number> {
  const digest = await sha256(concatBytes(utf8(`${name}\n`), new Uint8Array([ED25519]), publicKey));
  return new DataView(digest.buffer).getUint32(0);
}

function keyError(what: string, problem: string): CairnError {
  return new CairnError('E_INPUT', `${what} is not a note key: ${problem}`);
}

/** `<name>+<hex key id>+base64(0x01 ‖ public key)`. */
export async function formatVerifierKey(name: string, publicKey: Uint8Array): Promise<string> {
  if (!isKeyName(name)) throw keyError(JSON.stringify(name), 'the key name has a space or a "+"');
  return `${name}+${keyIdHex(await ed25519KeyId(name, publicKey))}+${toBase64(concatBytes(new Uint8Array([ED25519]), publicKey))}`;
}

function splitKey(text: string, what: string): { name: string; keyId: number; key: Bytes } {
  // The base64 key may hold "+" itself: only the first two separate fields.
  const first = text.indexOf('+');
  const second = first === -1 ? -1 : text.indexOf('+', first + 1);
  if (second === -1) throw keyError(what, 'it is not <name>+<hex id>+<base64 key>');
  const name = text.slice(0, first);
  const idHex = text.slice(first + 1, second);
  const keyText = text.slice(second + 1);
  if (!isKeyName(name)) throw keyError(what, 'the key name is empty or has a space');
  if (!/^[0-9a-f]{8}$/.test(idHex)) throw keyError(what, 'the key id is not 8 lower-case hex digits');
  const key = fromBase64(keyText, `${what}: the key`);
  if (key.length !== 33 || key[0] !== ED25519) throw keyError(what, 'the key is not 0x01 followed by 32 Ed25519 bytes');
  return { name, keyId: Number.parseInt(idHex, 16), key: key.slice(1) };
}

/** A verifier from `<name>+<hex id>+<base64 key>`, its key id checked against the key. */
export async function parseVerifierKey(text: string): Promise<NoteVerifier> {
  const what = 'the verifier key';
  const { name, keyId, key } = splitKey(text.trim(), what);
  if ((await ed25519KeyId(name, key)) !== keyId) throw keyError(what, 'the key id is not the hash of the name and key');
  const cryptoKey = await crypto.subtle.importKey('raw', key, ALGORITHM, false, ['verify']);
  return {
    name,
    keyId,
    publicKey: key,
    verify: (message, signature) => crypto.subtle.verify(ALGORITHM, cryptoKey, Uint8Array.from(signature), message),
  };
}

/** A signer from a raw 32-byte Ed25519 seed. */
export async function signerFromSeed(name: string, seed: Uint8Array): Promise<NoteSigner> {
  if (!isKeyName(name)) throw keyError(JSON.stringify(name), 'the key name is empty or has a space or a "+"');
  if (seed.length !== 32) throw keyError('the signer key', 'an Ed25519 seed is 32 bytes');
  const privateKey = await crypto.subtle.importKey('pkcs8', concatBytes(PKCS8_PREFIX, seed), ALGORITHM, true, ['sign']);
  const jwk = await crypto.subtle.exportKey('jwk', privateKey);
  if (typeof jwk.x !== 'string') throw new CairnError('E_INTERNAL', 'WebCrypto gave no public key for an Ed25519 private key');
  const publicKey = fromBase64Url(jwk.x);
  const keyId = await ed25519KeyId(name, publicKey);
  return { name, keyId, publicKey, sign: async (message) => new Uint8Array(await crypto.subtle.sign(ALGORITHM, privateKey, message)) };
}

function fromBase64Url(text: string): Bytes {
  const standard = text.replace(/-/g, '+').replace(/_/g, '/');
  return fromBase64(standard + '='.repeat((4 - (standard.length % 4)) % 4), 'a JWK key');
}

/** A signer from `PRIVATE+KEY+<name>+<hex id>+base64(0x01 ‖ seed)`, its id checked against the derived public key. */
export async function parseSignerKey(text: string): Promise<NoteSigner> {
  const what = 'the signer key';
  const trimmed = text.trim();
  if (!trimmed.startsWith('PRIVATE+KEY+')) throw keyError(what, 'it does not start with PRIVATE+KEY+');
  const { name, keyId, key } = splitKey(trimmed.slice('PRIVATE+KEY+'.length), what);
  const signer = await signerFromSeed(name, key);
  if (signer.keyId !== keyId) throw keyError(what, 'the key id is not the hash of the name and the public key');
  return signer;
}

export function formatSignerKey(name: string, keyId: number, seed: Uint8Array): string {
  return `PRIVATE+KEY+${name}+${keyIdHex(keyId)}+${toBase64(concatBytes(new Uint8Array([ED25519]), seed))}`;
}

/** A fresh key pair: the signer and its seed (to be written to a key file). */
export async function generateSigner(name: string): Promise<{ signer: NoteSigner; seed: Bytes }> {
  const pair = await crypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  if (!('privateKey' in pair)) throw new CairnError('E_INTERNAL', 'WebCrypto gave no Ed25519 key pair');
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey('pkcs8', pair.privateKey));
  const seed = pkcs8.slice(pkcs8.length - 32);
  return { signer: await signerFromSeed(name, seed), seed };
}

function checkText(text: string): void {
  if (!text.endsWith('\n') || hasControl(text)) throw new CairnError('E_INPUT', 'a note text ends in a newline and holds no control character but newlines');
  if (!text.isWellFormed()) throw new CairnError('E_INPUT', 'a note text is not valid UTF-8');
}

/** The signature line's base64: key id ‖ Ed25519 signature over the note text. */
export async function signNoteText(text: string, signer: NoteSigner): Promise<NoteSignature> {
  checkText(text);
  const signature = await signer.sign(utf8(text));
  const id = new Uint8Array(4);
  new DataView(id.buffer).setUint32(0, signer.keyId);
  return { name: signer.name, keyId: signer.keyId, base64: toBase64(concatBytes(id, signature)) };
}

/** text ‖ "\n" ‖ one "— name base64" line per signature. */
export function formatNote(text: string, signatures: readonly NoteSignature[]): string {
  checkText(text);
  if (signatures.length === 0) throw new CairnError('E_INPUT', 'a signed note has at least one signature');
  return `${text}\n${signatures.map((s) => `${SIGNATURE_PREFIX}${s.name} ${s.base64}\n`).join('')}`;
}

export async function signNote(text: string, signers: readonly NoteSigner[]): Promise<string> {
  const signatures: NoteSignature[] = [];
  for (const signer of signers) signatures.push(await signNoteText(text, signer));
  return formatNote(text, signatures);
}

export type NoteParse = { ok: true; text: string; signatures: NoteSignature[] } | { ok: false; message: string };

/** Splits a signed note at its last blank line; every line after it must be a signature line. */
export function parseNote(message: string): NoteParse {
  const fail = (why: string): NoteParse => ({ ok: false, message: `malformed note: ${why}` });
  if (!message.isWellFormed()) return fail('not valid UTF-8');
  if (hasControl(message)) return fail('a control character other than newline');
  if (!message.endsWith('\n')) return fail('it does not end in a newline');
  const split = message.lastIndexOf('\n\n');
  if (split === -1) return fail('no blank line before the signatures');
  const text = message.slice(0, split + 1);
  const lines = message.slice(split + 2, -1).split('\n');
  if (lines.length > MAX_NOTE_SIGNATURES) return fail(`more than ${MAX_NOTE_SIGNATURES} signatures`);
  const signatures: NoteSignature[] = [];
  for (const line of lines) {
    if (!line.startsWith(SIGNATURE_PREFIX)) return fail(`${JSON.stringify(line.slice(0, 40))} is not a signature line`);
    const rest = line.slice(SIGNATURE_PREFIX.length);
    const space = rest.indexOf(' ');
    const name = space === -1 ? '' : rest.slice(0, space);
    const base64 = space === -1 ? '' : rest.slice(space + 1);
    if (!isKeyName(name)) return fail('a signature line has no valid key name');
    let raw: Bytes;
    try {
      raw = fromBase64(base64, 'a signature');
    } catch {
      return fail(`the signature of ${name} is not base64`);
    }
    if (raw.length < 5) return fail(`the signature of ${name} is too short`);
    signatures.push({ name, keyId: new DataView(raw.buffer).getUint32(0), base64 });
  }
  return { ok: true, text, signatures };
}

export type NoteCheck =
  | { ok: true; text: string; verified: NoteSignature[]; unverified: NoteSignature[] }
  | { ok: false; reason: 'malformed' | 'invalid_signature' | 'no_known_signature' | 'ambiguous_key'; message: string };

/**
 * Opens a signed note against known verifiers (c2sp.org/signed-note): a signature from an unknown
 * key (name and id not both known) is ignored; one from a known key must verify, or the whole
 * note is refused; at least one known signature must verify.
 */
export async function openNote(message: string, verifiers: readonly NoteVerifier[]): Promise<NoteCheck> {
  const parsed = parseNote(message);
  if (!parsed.ok) return { ok: false, reason: 'malformed', message: parsed.message };
  const verified: NoteSignature[] = [];
  const unverified: NoteSignature[] = [];
  const body = utf8(parsed.text);
  for (const signature of parsed.signatures) {
    const matches = verifiers.filter((v) => v.name === signature.name && v.keyId === signature.keyId);
    if (matches.length === 0) {
      unverified.push(signature);
      continue;
    }
    const key = `${signature.name}+${keyIdHex(signature.keyId)}`;
    if (matches.length > 1) return { ok: false, reason: 'ambiguous_key', message: `ambiguous key ${key}` };
    const raw = fromBase64(signature.base64);
    if (!(await matches[0]!.verify(body, raw.slice(4)))) return { ok: false, reason: 'invalid_signature', message: `invalid signature for key ${key}` };
    if (!verified.some((v) => v.base64 === signature.base64)) verified.push(signature);
  }
  if (verified.length === 0) return { ok: false, reason: 'no_known_signature', message: 'note has no verifiable signatures' };
  return { ok: true, text: parsed.text, verified, unverified: unverified.filter((u, i) => unverified.findIndex((x) => x.base64 === u.base64) === i) };
}

export function describeKey(verifier: Pick<NoteVerifier, 'name' | 'keyId'>): string {
  return `${verifier.name}+${keyIdHex(verifier.keyId)}`;
}

