import { describe, expect, it } from 'vitest';
import { createSseParser } from './sse.js';
import type { SseMessage } from './sse.js';

function parse(chunks: string[]): { messages: SseMessage[]; lastEventId: string } {
  const messages: SseMessage[] = [];
  const parser = createSseParser((message) => messages.push(message));
  for (const chunk of chunks) parser.push(chunk);
  return { messages, lastEventId: parser.lastEventId };
}

const STREAM = 'retry: 1000\n\nid: run_a:1\nevent: receipt\ndata: {"seq":1}\n\n: heartbeat\n\nid: run_a:2\nevent: receipt\ndata: {"seq":2}\n\n';

describe('createSseParser', () => {
  it("reads the gateway's stream: receipts with their ids; retry and heartbeats are not messages", () => {
    expect(parse([STREAM])).toEqual({
      messages: [
        { id: 'run_a:1', event: 'receipt', data: '{"seq":1}' },
        { id: 'run_a:2', event: 'receipt', data: '{"seq":2}' },
      ],
      lastEventId: 'run_a:2',
    });
  });

  it('gives the same messages whatever the chunking, down to one character at a time', () => {
    const whole = parse([STREAM]);
    expect(parse(STREAM.split(''))).toEqual(whole);
    expect(parse([STREAM.slice(0, 17), STREAM.slice(17, 60), STREAM.slice(60)])).toEqual(whole);
  });

  it('accepts CRLF and CR line ends, joins data lines, keeps an id across messages', () => {
    const { messages } = parse(['id: x:1\r\ndata: a\r\ndata: b\r\n\r', '\ndata:c\r\rdata: d\n\n']);
    expect(messages).toEqual([
      { id: 'x:1', event: 'message', data: 'a\nb' },
      { id: 'x:1', event: 'message', data: 'c' },
      { id: 'x:1', event: 'message', data: 'd' },
    ]);
  });

  it('keeps U+2028 and U+2029 inside a data line, raw or escaped (only CR and LF end an SSE line)', () => {
    const raw = '{"argv":["a\u2028b\u2029c"]}';
    const escaped = '{"argv":["a\\u2028b\\u2029c"]}';
    const stream = `id: run_a:1\nevent: receipt\ndata: ${raw}\n\nid: run_a:2\nevent: receipt\ndata: ${escaped}\n\n`;
    for (const chunks of [[stream], stream.split('')]) {
      const { messages } = parse(chunks);
      expect(messages.map((m) => m.data)).toEqual([raw, escaped]);
      expect(messages.map((m) => JSON.parse(m.data) as unknown)).toEqual([{ argv: ['a\u2028b\u2029c'] }, { argv: ['a\u2028b\u2029c'] }]);
    }
  });

  it('does not dispatch a message that has not ended', () => {
    expect(parse(['id: run_a:3\nevent: receipt\ndata: {"seq":3}\n']).messages).toEqual([]);
  });
});
