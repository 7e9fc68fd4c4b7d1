import { CairnError } from '@cairn/contracts';
import { fromBase64, toBase64 } from './bytes.js';
import type { Bytes } from './bytes.js';
import { HASH_SIZE } from './merkle.js';
import { signNote } from './note.js';
import type { NoteSigner } from './note.js';

/*
 * The body of a C2SP transparency-log checkpoint (c2sp.org/tlog-checkpoint): the origin line, the
 * tree size in decimal (no leading zeroes), the base64 RFC 6962 root hash, then optional
 * non-empty extension lines; every line ends in "\n". Signed as a note (./note.ts).
 */

export interface Checkpoint {
  origin: string;
  size: number;
  rootHash: Bytes;
  extensions: string[];
}

function fail(problem: string): CairnError {
  return new CairnError('E_INPUT', `not a checkpoint: ${problem}`);
}

export function formatCheckpoint(checkpoint: { origin: string; size: number; rootHash: Uint8Array; extensions?: readonly string[] }): string {
  const { origin, size, rootHash, extensions = [] } = checkpoint;
  if (origin === '' || origin.includes('\n')) throw fail('the origin is one non-empty line');
  if (!Number.isSafeInteger(size) || size < 0) throw fail(`the size ${size} is not a non-negative integer`);
  if (rootHash.length !== HASH_SIZE) throw fail('the root hash is 32 bytes');
  if (extensions.some((line) => line === '' || line.includes('\n'))) throw fail('an extension line is one non-empty line');
  return [origin, String(size), toBase64(rootHash), ...extensions].map((line) => `${line}\n`).join('');
}

/** A checkpoint body (a signed note's text), strictly: E_INPUT naming what is wrong. */
export function parseCheckpoint(text: string): Checkpoint {
  if (!text.endsWith('\n')) throw fail('the text does not end in a newline');
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3) throw fail('fewer than three lines');
  const [origin, sizeText, rootText, ...extensions] = lines as [string, string, string, ...string[]];
  if (origin === '') throw fail('the origin line is empty');
  if (!/^(0|[1-9][0-9]*)$/.test(sizeText)) throw fail(`the size line ${JSON.stringify(sizeText)} is not a decimal without leading zeroes`);
  const size = Number(sizeText);
  if (!Number.isSafeInteger(size)) throw fail(`the size ${sizeText} is too large`);
  const rootHash = fromBase64(rootText, 'the root hash line');
  if (rootHash.length !== HASH_SIZE) throw fail(`the root hash is ${rootHash.length} bytes, not ${HASH_SIZE}`);
  if (extensions.some((line) => line === '')) throw fail('an extension line is empty');
  return { origin, size, rootHash, extensions };
}

/** The signed note of a checkpoint whose origin is the signer's key name (how Cairn names its log). */
export async function signCheckpoint(size: number, rootHash: Uint8Array, signer: NoteSigner): Promise<string> {
  return signNote(formatCheckpoint({ origin: signer.name, size, rootHash }), [signer]);
}
