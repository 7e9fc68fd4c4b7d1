import { JUDGED_GRADE_TYPES } from '@cairn/judgement';
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { isCairnError } from '@cairn/contracts';
import { ChainVerifier, LineTooLongError, readLines, recordedBreakOf, recordedBreaksOf, verifyChain } from '@cairn/evidence';
import type { ChainVerification, RecordedBreak } from '@cairn/evidence';
import { usageError } from './exit-codes.js';

/** The proof bundle formats this CLI reads (PRODUCT.md: one JSON document with a `format` field); v2 adds the log proof. */
export const BUNDLE_FORMAT = 'cairn.bundle/v1';
export const BUNDLE_V2_FORMAT = 'cairn.bundle/v2';
const BUNDLE_FORMATS: readonly string[] = [BUNDLE_FORMAT, BUNDLE_V2_FORMAT];
const BUNDLE_FORMAT_PREFIX = 'cairn.bundle/';
/** A bundle is read whole; a chain file never is (it streams line by line in constant memory). */
export const MAX_BUNDLE_BYTES = 256 * 1024 * 1024;
/** A line of a chain file is held whole while it is read: at most what a bundle may be (one may be a line). */
export const MAX_LINE_LENGTH = MAX_BUNDLE_BYTES;

export type EvidenceFileFormat = 'chain' | 'bundle';

/** What a proof bundle says about itself besides its receipts (checked against them by the caller). */
export interface BundleClaims {
  runId: string | null;
  headHash: string | null;
  verdict: string | null;
  grade: { score: number; maxScore: number; upperBound: number } | null;
  artifacts: Record<string, string>;
}

export interface FileVerification {
  format: EvidenceFileFormat;
  verification: ChainVerification;
  /** Only for a proof bundle. */
  claims?: BundleClaims;
  /** The last receipt read (a seal carries its signature), when the chain verified this far. */
  last?: unknown;
  /** Only for a proof bundle: its format and the document (a v2's log proof is checked from it). */
  bundle?: { format: string; document: Record<string, unknown> };
  /** The receipts a judged grade is re-derived from (`checkJudgedGrade`), as read. */
  judgedReceipts?: unknown[];
  /**
   * Breaks the chain records of itself: each critical `alert.raised` E_CHAIN_BROKEN on it (a
   * message of the log that was not a receipt, ADR 0033, is no part of the hash chain — the
   * receipts verify, and the chain says where it was broken and why).
   */
  recordedBreaks?: RecordedBreak[];
}

function bundleClaims(document: Record<string, unknown>): BundleClaims {
  const text = (value: unknown) => (typeof value === 'string' ? value : null);
  const grade = document.grade as Record<string, unknown> | null | undefined;
  const isNumber = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);
  const artifacts: Record<string, string> = {};
  if (typeof document.artifacts === 'object' && document.artifacts !== null) {
    for (const [path, hash] of Object.entries(document.artifacts)) if (typeof hash === 'string') artifacts[path] = hash;
  }
  return {
    runId: text(document.runId),
    headHash: text(document.headHash),
    verdict: text(document.verdict),
    grade:
      typeof grade === 'object' && grade !== null && isNumber(grade.score) && isNumber(grade.maxScore) && isNumber(grade.upperBound)
        ? { score: grade.score, maxScore: grade.maxScore, upperBound: grade.upperBound }
        : null,
    artifacts,
  };
}

function errnoCode(error: unknown): string {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : 'unreadable';
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (error) {
    return { ok: false, message: error instanceof Error ? error.message : String(error) };
  }
}

/** A document is a bundle when it is one object whose `format` names a Cairn bundle version. */
function bundleFormatOf(value: unknown): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const format = (value as Record<string, unknown>).format;
  return typeof format === 'string' && format.startsWith(BUNDLE_FORMAT_PREFIX) ? format : null;
}

/** Verifies a proof bundle already in memory (read from a file, or fetched from a gateway). */
export function verifyBundleDocument(document: unknown, path: string): FileVerification {
  const format = bundleFormatOf(document);
  if (format === null || !BUNDLE_FORMATS.includes(format)) {
    throw usageError(`${path}: unsupported proof bundle format ${JSON.stringify(format)} (this cairn reads ${BUNDLE_FORMATS.join(' and ')})`, { format });
  }
  const receipts = (document as Record<string, unknown>).receipts;
  if (!Array.isArray(receipts)) throw usageError(`${path}: a proof bundle needs a receipts array`);
  return {
    format: 'bundle',
    verification: verifyChain(receipts as unknown[], { requireNonEmpty: true }),
    claims: bundleClaims(document as Record<string, unknown>),
    last: receipts.at(-1),
    bundle: { format, document: document as Record<string, unknown> },
    judgedReceipts: (receipts as unknown[]).filter(isJudgedGradeReceipt),
    recordedBreaks: recordedBreaksOf(receipts as unknown[]),
  };
}

async function readWholeBundle(path: string, size: number): Promise<unknown> {
  if (size > MAX_BUNDLE_BYTES) return undefined;
  const parsed = parseJson(await readFile(path, 'utf8'));
  return parsed.ok && bundleFormatOf(parsed.value) !== null ? parsed.value : undefined;
}

/**
 * Verifies an evidence file offline: a chain file (JSON Lines, one receipt per line: lines end at
 * "\n" only, a "\r" before it dropped, so U+2028/U+2029 and a lone "\r" are text) streamed line by
 * line through `ChainVerifier`, or a proof bundle (one JSON document). A line that is not a
 * receipt, or longer than `maxLineLength`, breaks the chain at its position; an unreadable file is
 * a usage error.
 */
export async function verifyFile(path: string, options: { maxLineLength?: number } = {}): Promise<FileVerification> {
  let size: number;
  try {
    const info = await stat(path);
    if (!info.isFile()) throw usageError(`cannot read ${path}: not a regular file`, { path });
    size = info.size;
  } catch (error) {
    if (isCairnError(error)) throw error;
    throw usageError(`cannot read ${path}: ${errnoCode(error)}`, { path });
  }

  const input = createReadStream(path);
  const verifier = new ChainVerifier({ requireNonEmpty: true });
  let lineNo = 0;
  let firstBlankLine = 0;
  let seenContent = false;
  let oneLineBundle: unknown = undefined;
  let last: unknown = undefined;
  const judgedReceipts: unknown[] = [];
  const recordedBreaks: RecordedBreak[] = [];
  try {
    for await (const raw of readLines(input, { maxLineLength: options.maxLineLength ?? MAX_LINE_LENGTH })) {
      lineNo += 1;
      const line = lineNo === 1 ? raw.replace(/^\uFEFF/, '') : raw;
      if (line.trim() === '') {
        if (firstBlankLine === 0) firstBlankLine = lineNo;
        continue;
      }
      if (oneLineBundle !== undefined) throw usageError(`${path}: unexpected content after the proof bundle (line ${lineNo})`);
      const parsed = parseJson(line);

      if (!seenContent) {
        seenContent = true;
        // A bundle on one line, or pretty-printed (its first line alone is not JSON).
        if (parsed.ok && bundleFormatOf(parsed.value) !== null) {
          oneLineBundle = parsed.value;
          continue;
        }
        if (!parsed.ok && line.trimStart().startsWith('{')) {
          input.destroy();
          const bundle = await readWholeBundle(path, size);
          if (bundle !== undefined) return verifyBundleDocument(bundle, path);
        }
      }

      if (firstBlankLine !== 0) {
        verifier.breakHere('malformed', `line ${firstBlankLine} is blank: a chain file holds one receipt per line`);
        break;
      }
      if (!parsed.ok) {
        verifier.breakHere('malformed', `line ${lineNo} is not JSON: ${parsed.message}`);
        break;
      }
      if (!verifier.push(parsed.value)) break;
      last = parsed.value;
      if (isJudgedGradeReceipt(parsed.value)) judgedReceipts.push(parsed.value);
      const recorded = recordedBreakOf(parsed.value);
      if (recorded !== null) recordedBreaks.push(recorded);
    }
  } catch (error) {
    if (error instanceof LineTooLongError) {
      // Refused before it is held whole: memory stays bounded whatever the file holds.
      if (oneLineBundle !== undefined) throw usageError(`${path}: unexpected content after the proof bundle (line ${error.line})`);
      verifier.breakHere(
        'malformed',
        firstBlankLine !== 0 ? `line ${firstBlankLine} is blank: a chain file holds one receipt per line` : `line ${error.line} is longer than ${error.maxLineLength} characters`,
      );
    } else {
      if (isCairnError(error)) throw error;
      throw usageError(`cannot read ${path}: ${errnoCode(error)}`, { path });
    }
  } finally {
    input.destroy();
  }
  if (oneLineBundle !== undefined) return verifyBundleDocument(oneLineBundle, path);
  return { format: 'chain', verification: verifier.result(), last, judgedReceipts, recordedBreaks };
}

function isJudgedGradeReceipt(value: unknown): boolean {
  return typeof value === 'object' && value !== null && JUDGED_GRADE_TYPES.has(String((value as { type?: unknown }).type));
}
