import { readFile } from 'node:fs/promises';
import { CairnError, isCairnError } from '@cairn/contracts';
import { parseVerifierKey, sealOfReceipt, verifySealSignature } from '@cairn/transparency';
import type { NoteVerifier } from '@cairn/transparency';
import { usageError } from './exit-codes.js';

/*
 * The seal signature check of `cairn verify` (docs/proofs.md): offline, against keys the caller
 * trusts — given with --key or pinned in a trust file (one verifier key a line, `#` comments) —
 * never against keys fetched from the server whose chain is being checked.
 */

export type SealCheck =
  | { status: 'verified'; key: string }
  | { status: 'unchecked'; key: string }
  | { status: 'unsigned' }
  | { status: 'not_sealed' };

/** The keys of `--key` options and trust files; a key or file that does not parse is a usage error. */
export async function trustedKeys(keys: readonly string[], trustFiles: readonly string[]): Promise<NoteVerifier[]> {
  const lines: { text: string; from: string }[] = keys.map((text) => ({ text, from: '--key' }));
  for (const path of trustFiles) {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      throw usageError(`cannot read the trust file ${path}: ${(error as { code?: string }).code ?? 'unreadable'}`, { path });
    }
    for (const line of text.split('\n').map((l) => l.trim())) if (line !== '' && !line.startsWith('#')) lines.push({ text: line, from: path });
  }
  const verifiers: NoteVerifier[] = [];
  for (const { text, from } of lines) {
    try {
      verifiers.push(await parseVerifierKey(text));
    } catch (error) {
      if (isCairnError(error)) throw usageError(`${from}: ${error.message}`);
      throw error;
    }
  }
  return verifiers;
}

/**
 * Checks the seal (the last receipt) of a chain that verified: with trusted keys, an unsigned seal,
 * a missing seal or a signature that does not hold is E_CHAIN_BROKEN with its own reason; without
 * keys a signature is reported, not checked.
 */
export async function checkSeal(last: unknown, trusted: readonly NoteVerifier[]): Promise<SealCheck> {
  const seal = sealOfReceipt(last);
  const wanted = trusted.length > 0;
  if (seal.kind === 'not_sealed') {
    if (wanted) throw new CairnError('E_CHAIN_BROKEN', 'a key was given, but the chain does not end in a seal', { reason: 'not_sealed' });
    return { status: 'not_sealed' };
  }
  if (seal.kind === 'unsigned') {
    if (wanted) throw new CairnError('E_CHAIN_BROKEN', 'a key was given, but the seal is not signed', { reason: 'seal_unsigned' });
    return { status: 'unsigned' };
  }
  const key = `${seal.fields.key_name}+${seal.fields.key_id}`;
  if (!wanted) return { status: 'unchecked', key };
  const checked = await verifySealSignature(seal.statement, seal.fields, trusted);
  if (!checked.ok) {
    const reason = checked.reason === 'unknown_key' ? 'seal_key_unknown' : 'seal_signature_invalid';
    throw new CairnError('E_CHAIN_BROKEN', `the seal's signature does not hold: ${checked.message}`, { reason, key });
  }
  return { status: 'verified', key: checked.key };
}

export function formatSealCheck(check: SealCheck): { human: string; machine: Record<string, unknown> } {
  switch (check.status) {
    case 'verified':
      return { human: `seal signed by ${check.key}: verified`, machine: { seal: { signed: true, verified: true, key: check.key } } };
    case 'unchecked':
      return { human: `seal signed by ${check.key}: not checked (give --key or --trust-file)`, machine: { seal: { signed: true, verified: false, key: check.key } } };
    case 'unsigned':
      return { human: 'seal not signed: the chain is intact, but nothing says who sealed it', machine: { seal: { signed: false, verified: false } } };
    case 'not_sealed':
      return { human: 'not sealed', machine: { seal: null } };
  }
}
