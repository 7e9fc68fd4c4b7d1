import { traceparentOf } from '@cairn/tracing';
import type { RawEvidenceMessage } from '@cairn/persistence';
import type { JsMsg } from '@nats-io/jetstream';

/**
 * A delivery as the writer folds it. Its headers are decoded only if the fold asks for its
 * `traceparent` (a run's first receipt), as a rebuild's read of the stream does: both hand the fold
 * the header the message was stored with, so both give a run the same trace id (ADR 0031).
 */
export function rawMessageOf(m: Pick<JsMsg, 'seq' | 'subject' | 'data' | 'headers'>): RawEvidenceMessage {
  return {
    streamSeq: m.seq,
    subject: m.subject,
    data: m.data,
    get traceparent() {
      return traceparentOf(m.headers);
    },
  };
}
