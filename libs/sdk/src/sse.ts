/*
 * Server-Sent Events as the WHATWG "event stream interpretation" reads them, from a fetch body:
 * EventSource cannot send an Authorization header, and a key must never go in a URL. Only CR and
 * LF end a line (U+2028 and U+2029 are text); `id:` persists across messages; comments (the
 * gateway's heartbeats) and `retry:` are not messages.
 */

export interface SseMessage {
  /** The last `id:` seen: what a reconnect sends as Last-Event-ID. */
  id: string;
  event: string;
  data: string;
}

export interface SseParser {
  /** Feeds decoded text in any chunking; calls `onMessage` for each complete message. */
  push(text: string): void;
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
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id' && !value.includes('\u0000')) lastEventId = value;
  };

  return {
    push(text: string) {
      buffer += text;
      let start = 0;
      for (let i = 0; i < buffer.length; i++) {
        const char = buffer[i];
        if (char === '\n' && pendingCr) {
          // The \n of a \r\n whose \r ended the previous line.
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

/** The messages of a byte stream, in order; a message the stream ended in the middle of is not one. */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  const ready: SseMessage[] = [];
  const parser = createSseParser((message) => ready.push(message));
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(decoder.decode(value, { stream: true }));
      while (ready.length > 0) yield ready.shift() as SseMessage;
    }
    parser.push(decoder.decode());
    while (ready.length > 0) yield ready.shift() as SseMessage;
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
