import { ChunkRequestSchema } from '@cairn/contracts';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';

/**
 * Serves `content` on `subject` a chunk of `chunkBytes` per request (`{ index }`), so the worker
 * pulls it and nothing is sent that nobody reads; an index past the end, or a request that is not
 * one, is answered empty. The caller unsubscribes once the worker has answered.
 */
export function serveChunks(nc: NatsConnection, subject: string, content: Uint8Array, chunkBytes: number): Subscription {
  const chunks = Math.max(1, Math.ceil(content.byteLength / chunkBytes));
  return nc.subscribe(subject, {
    callback: (error, msg) => {
      if (error !== null) return;
      const asked = ChunkRequestSchema.safeParse(safeJson(msg.data));
      if (!asked.success || asked.data.index >= chunks) {
        msg.respond(new Uint8Array(0));
        return;
      }
      const from = asked.data.index * chunkBytes;
      msg.respond(content.subarray(from, Math.min(content.byteLength, from + chunkBytes)));
    },
  });
}

/** A message's JSON, or null when it is not JSON. */
export function safeJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    return null;
  }
}
