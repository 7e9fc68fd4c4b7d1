import type { RawEvidenceMessage } from '../projection-fold.js';
import type { ProjectionSource } from '../projection-rebuild.js';

/** A stream in memory: what `EvidenceLog` is to a rebuild or a check, without a broker. */
export function memorySource(messages: readonly RawEvidenceMessage[], streamName: string, subjectPrefix: string): ProjectionSource {
  return {
    streamName,
    subjectPrefix,
    lastStreamSeq: () => Promise.resolve(messages.length),
    async *readAll(options = {}) {
      for (const message of messages) {
        if (message.streamSeq >= (options.fromStreamSeq ?? 1) && message.streamSeq <= (options.toStreamSeq ?? Infinity)) yield await Promise.resolve(message);
      }
    },
  };
}
