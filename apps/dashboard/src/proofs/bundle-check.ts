import { recordedBreaksOf } from '@cairn/evidence/recorded-breaks';
import { checkSealProofs, parseVerifierKey } from '@cairn/transparency';
import type { NoteVerifier, ProofLine } from '@cairn/transparency';
import { verifyChain } from '../chain/verify-chain.js';

/*
 * What the proof panel and the "Verify a bundle" page check, in this browser with WebCrypto: a
 * proof bundle's chain (every hash recomputed from genesis, no break recorded on it, its claims
 * agreeing with it), then for a cairn.bundle/v2 the seal's signature, the checkpoint's signature,
 * that the log's leaf is this chain's head, and the RFC 6962 inclusion path to the checkpoint's
 * root — with @cairn/transparency's checkSealProofs, the very steps `cairn verify` runs. Each line
 * says verified, or why not.
 */

export const BUNDLE_V1_FORMAT = 'cairn.bundle/v1';
export const BUNDLE_V2_FORMAT = 'cairn.bundle/v2';
/** A dropped or pasted bundle is read whole: past this it is refused, not read. */
export const MAX_BUNDLE_BYTES = 64 * 1024 * 1024;

export const PROOF_LINES = ['chain', 'signature', 'checkpoint', 'leaf', 'inclusion'] as const;
export type ProofLineName = (typeof PROOF_LINES)[number];

export type BundleLine = ProofLine | { status: 'failed'; reason: string; message: string };

export interface BundleCheck {
  format: string;
  chainId: string | null;
  headHash: string | null;
  lines: Record<ProofLineName, BundleLine>;
  ok: boolean;
}

export type ParsedBundle = { ok: true; document: Record<string, unknown> } | { ok: false; message: string };

/** A bundle's text (a file dropped, or pasted), parsed as one JSON document naming a Cairn bundle format. */
export function parseBundleText(text: string): ParsedBundle {
  if (text.length > MAX_BUNDLE_BYTES) return { ok: false, message: `a bundle read here is at most ${MAX_BUNDLE_BYTES / 1024 / 1024} MiB` };
  let value: unknown;
  try {
    value = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (error) {
    return { ok: false, message: `not JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { ok: false, message: 'a proof bundle is one JSON object' };
  const format = (value as Record<string, unknown>).format;
  if (format !== BUNDLE_V1_FORMAT && format !== BUNDLE_V2_FORMAT) {
    return { ok: false, message: `unsupported format ${JSON.stringify(format)}: this page reads ${BUNDLE_V1_FORMAT} and ${BUNDLE_V2_FORMAT}` };
  }
  if (!Array.isArray((value as Record<string, unknown>).receipts)) return { ok: false, message: 'a proof bundle needs a receipts array' };
  return { ok: true, document: value as Record<string, unknown> };
}

export interface TrustedKeys {
  verifiers: NoteVerifier[];
  /** One line for each key that does not parse (it is left out, never half-trusted). */
  errors: string[];
}

/** Verifier keys `<name>+<hex id>+<base64>`, one a line (`#` comments and blank lines skipped), as a trust file holds them. */
export async function parseTrustedKeys(lines: readonly string[]): Promise<TrustedKeys> {
  const verifiers: NoteVerifier[] = [];
  const errors: string[] = [];
  for (const line of lines.map((l) => l.trim())) {
    if (line === '' || line.startsWith('#')) continue;
    try {
      verifiers.push(await parseVerifierKey(line));
    } catch (error) {
      errors.push(`${line.slice(0, 40)}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return { verifiers, errors };
}

/** A cairn.bundle/v2 made from its parts as the gateway serves them, as `cairn export --bundle` makes it. */
export function assembleBundleV2(bundle: Record<string, unknown>, inclusion: unknown, sealKeys: readonly string[]): Record<string, unknown> {
  const receipts = Array.isArray(bundle.receipts) ? (bundle.receipts as unknown[]) : [];
  const seal = receipts.at(-1) as Record<string, unknown> | undefined;
  return { ...bundle, format: BUNDLE_V2_FORMAT, sealSignature: seal?.signature, inclusion, sealKeys: [...sealKeys] };
}

const skippedAll = (message: string) => ({ status: 'skipped' as const, message });

/** Checks a parsed bundle against `trusted` keys; the chain first, the rest only on a chain that holds. */
export async function checkBundle(document: Record<string, unknown>, trusted: readonly NoteVerifier[]): Promise<BundleCheck> {
  const format = typeof document.format === 'string' ? document.format : '';
  const receipts = Array.isArray(document.receipts) ? (document.receipts as unknown[]) : [];
  const first = receipts[0] as Record<string, unknown> | undefined;
  const chainId = typeof first?.run_id === 'string' ? first.run_id : null;
  const done = (chain: BundleLine, rest: Omit<BundleCheck['lines'], 'chain'>, headHash: string | null): BundleCheck => {
    const lines = { chain, ...rest };
    return { format, chainId, headHash, lines, ok: PROOF_LINES.every((name) => lines[name].status === 'verified') };
  };
  const broken = (reason: string, message: string) => {
    const why = skippedAll('the chain does not verify');
    return done({ status: 'failed', reason, message }, { signature: why, checkpoint: why, leaf: why, inclusion: why }, null);
  };

  if (receipts.length === 0 || chainId === null) return broken('malformed', 'a proof bundle holds at least one receipt, the first naming its chain');
  const chain = await verifyChain(receipts, chainId);
  if (!chain.ok) return broken(chain.reason, `receipt #${chain.firstBadSeq}: ${chain.message}`);
  // Receipts that verify, on a chain that records it was broken (ADR 0033): `cairn verify`'s break_recorded.
  const recorded = recordedBreaksOf(receipts)[0];
  if (recorded !== undefined) return broken('break_recorded', `the receipts verify, but receipt #${recorded.seq} records that the chain was broken: ${recorded.message}`);
  if (typeof document.runId === 'string' && document.runId !== chainId) return broken('run_id_mismatch', `the bundle names ${document.runId}, its receipts are the chain of ${chainId}`);
  if (typeof document.headHash === 'string' && document.headHash !== chain.headHash) return broken('head_mismatch', `the bundle names head ${document.headHash.slice(0, 12)}…, its receipts recompute to ${chain.headHash.slice(0, 12)}…`);
  const chainLine: BundleLine = { status: 'verified', message: `${chain.count} receipts from genesis, head ${chain.headHash.slice(0, 12)}…` };

  if (format === BUNDLE_V2_FORMAT) {
    const report = await checkSealProofs({ seal: receipts.at(-1), inclusion: document.inclusion, sealSignature: document.sealSignature }, trusted);
    return done(chainLine, { signature: report.signature, checkpoint: report.checkpoint, leaf: report.leaf, inclusion: report.inclusion }, chain.headHash);
  }
  // A v1 bundle: its seal's signature can be checked; it carries no log proof, and says so.
  const report = await checkSealProofs({ seal: receipts.at(-1), inclusion: null }, trusted);
  const none = skippedAll(`a ${format} carries no log proof: export a ${BUNDLE_V2_FORMAT} for it`);
  return done(chainLine, { signature: report.signature, checkpoint: none, leaf: none, inclusion: none }, chain.headHash);
}
