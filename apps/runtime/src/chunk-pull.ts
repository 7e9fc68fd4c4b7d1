import { CHUNK_INBOX } from '@cairn/config';
import { CairnError } from '@cairn/contracts';
import { inboxOf } from '@cairn/evidence-log';
import type { NatsConnection } from '@nats-io/transport-node';

/** Where a caller serves its bytes, and how many it names. */
export interface ChunkSource {
  data_subject: string;
  chunks: number;
  bytes: number;
}

/**
 * The caller's bytes, a chunk per request, each answered into an inbox of its own kind (`<worker's
 * prefix>.chunks.…`): the only inboxes of a worker the gateway may publish into, so it cannot answer
 * anything else of the worker's (ADR 0022). Stops past the size named: the caller checks what it got.
 */
export async function pullChunks(nc: NatsConnection, source: ChunkSource, what: string, details?: Record<string, unknown>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let size = 0;
  for (let index = 0; index < source.chunks; index++) {
    const reply = inboxOf(nc, CHUNK_INBOX);
    const msg = await nc.request(source.data_subject, new TextEncoder().encode(JSON.stringify({ index })), { timeout: 10_000, noMux: true, reply }).catch((error: unknown) => {
      throw new CairnError('E_UNAVAILABLE', `chunk ${index} of ${what} did not arrive: ${error instanceof Error ? error.message : String(error)}`, details);
    });
    size += msg.data.byteLength;
    if (size > source.bytes) break;
    parts.push(msg.data);
  }
  const content = Buffer.concat(parts);
  return new Uint8Array(content.buffer, content.byteOffset, content.byteLength);
}
