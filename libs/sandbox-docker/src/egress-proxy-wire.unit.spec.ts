import { describe, expect, it } from 'vitest';
import { BoundedLines, MAX_LINE_BYTES, parseProxyMessage } from './egress-proxy-wire.js';

describe('what the runtime takes from its egress proxy process', () => {
  it('reads its three messages, and nothing but them', () => {
    expect(parseProxyMessage('{"t":"listening","port":40123}')).toEqual({ t: 'listening', port: 40123 });
    expect(parseProxyMessage('{"t":"denied","host":"evil.test","port":443,"reason":"not_allowlisted"}')).toEqual({ t: 'denied', host: 'evil.test', port: 443, reason: 'not_allowlisted' });
    expect(parseProxyMessage('{"t":"denied","host":"2001:db8::1","port":80,"reason":"private_address"}')).toMatchObject({ host: '2001:db8::1' });
    expect(parseProxyMessage(`{"t":"failed","message":"${'x'.repeat(900)}"}`)).toEqual({ t: 'failed', message: 'x'.repeat(512) });
    expect(parseProxyMessage('{"t":"synced","n":7}')).toEqual({ t: 'synced', n: 7 });
  });

  it.each([
    ['not JSON', 'denied evil.test'],
    ['an array', '[1,2]'],
    ['an unknown message', '{"t":"exec","argv":["sh"]}'],
    ['an extra field', '{"t":"listening","port":1,"also":true}'],
    ['a port out of range', '{"t":"listening","port":70000}'],
    ['a negative sync', '{"t":"synced","n":-1}'],
    ['a fractional port', '{"t":"denied","host":"a.test","port":1.5,"reason":"not_allowlisted"}'],
    ['a reason not in the union', '{"t":"denied","host":"a.test","port":1,"reason":"because"}'],
    ['a host with spaces', '{"t":"denied","host":"a test","port":1,"reason":"not_allowlisted"}'],
    ['an upper-case host (never normalised so)', '{"t":"denied","host":"EVIL.test","port":1,"reason":"not_allowlisted"}'],
    ['a host with a newline', '{"t":"denied","host":"a\\nb","port":1,"reason":"not_allowlisted"}'],
    ['a host too long', `{"t":"denied","host":"${'a.'.repeat(130)}test","port":1,"reason":"not_allowlisted"}`],
  ])('refuses %s', (_what, line) => {
    expect(parseProxyMessage(line)).toBeNull();
  });

  it('splits lines across chunks and stops at the first line over the bound', () => {
    const lines: string[] = [];
    let overflowed = 0;
    const reader = new BoundedLines(16, (line) => lines.push(line), () => overflowed++);
    reader.push(Buffer.from('one\ntw'));
    reader.push(Buffer.from('o\nthree\n'));
    expect(lines).toEqual(['one', 'two', 'three']);
    reader.push(Buffer.from('x'.repeat(10)));
    reader.push(Buffer.from('x'.repeat(10)));
    reader.push(Buffer.from('\nafter\n'));
    expect(overflowed).toBe(1);
    expect(lines).toEqual(['one', 'two', 'three']);
    expect(MAX_LINE_BYTES).toBe(1024);
  });
});
