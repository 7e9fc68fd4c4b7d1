/*
 * A Server-Sent Events parser (the WHATWG "event stream interpretation"), for streams read with
 * fetch(): EventSource cannot send an Authorization header, and the key must never go in a URL.
 */

export interface SseMessage {
  /** The last `id:` seen (it persists across messages, as the spec says). */
  id: string;
  event: string;
  data: string;
}

export interface SseParser {
  /** Feeds decoded text (any chunking); calls `onMessage` for each complete message. */
  push(text: string): void;
  /** The last event id: what a reconnect sends as Last-Event-ID. */
  readonly lastEventId: string;
}

export function createSseParser(onMessage: (message: SseMessage) => void): SseParser {
  let buffer = '';
  let lastEventId = '';
  let event = '';
  let data: string[] = [];
  let pendingCr = false;

  const dispatch = () => {
    if (data.length > 0) onMessage({ id: lastEventId, event: event === '' ? 'message' : event, data: data.join('\n') });
    event = '';
    data = [];
  };

  const line = (text: string) => {
    if (text === '') return dispatch();
    if (text.startsWith(':')) return; // a comment: the heartbeat
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id' && !value.includes('\u0000')) lastEventId = value;
    // `retry` and unknown fields: the reconnect delay is the reader's own.
  };

  return {
    push(text: string) {
      buffer += text;
      let start = 0;
      for (let i = 0; i < buffer.length; i++) {
        const char = buffer[i];
        if (char === '\n' && pendingCr) {
          // The \n of a \r\n pair whose \r ended the previous line.
          pendingCr = false;
          start = i + 1;
          continue;
        }
        pendingCr = false;
        if (char === '\n' || char === '\r') {
          line(buffer.slice(start, i));
          pendingCr = char === '\r';
          start = i + 1;
        }
      }
      buffer = buffer.slice(start);
    },
    get lastEventId() {
      return lastEventId;
    },
  };
}
