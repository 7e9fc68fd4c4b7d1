import { CairnError } from '@cairn/contracts';
import { sha256Hex } from './bytes.js';
import { readAll } from './streams.js';
import type { RequestOptions, Transport } from './transport.js';

/*
 * Raw bytes the gateway serves (a step's stdout, a collected file, a sandbox's file or exec
 * output), read back and checked here too: they must hash to the sha256 the gateway names
 * (`X-Cairn-Sha256`: the one on the chain, checked before it served them) and, when the caller
 * knows it from a receipt, to that one. A mismatch is an error, never bytes.
 */

/** Read at most this much into memory at once unless told otherwise. */
export const DEFAULT_MAX_READ_BYTES = 64 * 1024 * 1024;

export interface ReadOptions {
  /** The most bytes read into memory (default 64 MiB); more is E_TOO_LARGE and nothing is returned. */
  maxBytes?: number;
  /** The sha256 the bytes must hash to (from a receipt the caller holds). */
  expectedSha256?: string;
  signal?: AbortSignal;
}

export interface Bytes {
  bytes: Uint8Array;
  /** Their sha256, recomputed here (or, with `checkHashes: false`, as the gateway named it). */
  sha256: string;
  /** The media type the gateway served them as. */
  contentType: string;
  /** The seq of the receipt that recorded the read (a sandbox's file: `X-Cairn-Seq`), else null. */
  seq: number | null;
}

/** A download not read yet: the caller streams `body` and checks it hashes to `sha256`. */
export interface OpenedBytes {
  body: ReadableStream<Uint8Array>;
  sha256: string;
  bytes: number | null;
  contentType: string;
  /** `Content-Disposition`, when the gateway gave one (files). */
  disposition: string | null;
  seq: number | null;
}

function seqOf(header: string | null): number | null {
  const seq = Number(header);
  return header !== null && Number.isSafeInteger(seq) && seq > 0 ? seq : null;
}

export async function openBytes(http: Transport, path: string, options: RequestOptions = {}): Promise<OpenedBytes> {
  const response = await http.send('GET', path, { accept: '*/*', timeoutMs: null, ...options });
  const sha256 = response.headers.get('x-cairn-sha256');
  if (sha256 === null || !/^[0-9a-f]{64}$/.test(sha256)) {
    await response.body?.cancel().catch(() => undefined);
    throw new CairnError('E_INTERNAL', `GET ${path}: the gateway named no sha256 for these bytes`);
  }
  const length = response.headers.get('content-length');
  return {
    body: response.body ?? new ReadableStream({ start: (controller) => controller.close() }),
    sha256,
    bytes: length === null ? null : Number(length),
    contentType: response.headers.get('content-type') ?? 'application/octet-stream',
    disposition: response.headers.get('content-disposition'),
    seq: seqOf(response.headers.get('x-cairn-seq')),
  };
}

export async function readBytes(http: Transport, path: string, options: ReadOptions = {}): Promise<Bytes> {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_READ_BYTES;
  const what = `GET ${path}`;
  const opened = await openBytes(http, path, options.signal === undefined ? {} : { signal: options.signal });
  if (options.expectedSha256 !== undefined && opened.sha256 !== options.expectedSha256) {
    await opened.body.cancel().catch(() => undefined);
    throw new CairnError('E_INTERNAL', `${what}: the gateway named sha256 ${opened.sha256}, not the ${options.expectedSha256} the receipt records`, {
      sha256: opened.sha256,
      expected: options.expectedSha256,
      reason: 'sha256_mismatch',
    });
  }
  if (opened.bytes !== null && opened.bytes > maxBytes) {
    await opened.body.cancel().catch(() => undefined);
    throw new CairnError('E_TOO_LARGE', `${what}: ${opened.bytes} bytes, more than the ${maxBytes} this client reads at once`, { bytes: opened.bytes, maxBytes });
  }
  const bytes = await readAll(opened.body, maxBytes, what);
  if (opened.bytes !== null && bytes.byteLength !== opened.bytes) {
    throw new CairnError('E_INTERNAL', `${what}: ${bytes.byteLength} bytes arrived of the ${opened.bytes} announced`, { reason: 'short_read' });
  }
  if (!http.checkHashes) return { bytes, sha256: opened.sha256, contentType: opened.contentType, seq: opened.seq };
  const sha256 = await sha256Hex(bytes);
  if (sha256 !== opened.sha256) {
    throw new CairnError('E_INTERNAL', `${what}: the bytes received hash to ${sha256}, but the gateway named ${opened.sha256}`, { sha256, named: opened.sha256, reason: 'sha256_mismatch' });
  }
  return { bytes, sha256, contentType: opened.contentType, seq: opened.seq };
}
