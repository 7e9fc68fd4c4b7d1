import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { checkWebhookUrl } from './url-guard.js';
import type { HostResolver } from './url-guard.js';

const resolver =
  (table: Record<string, string[]>): HostResolver =>
  (host) => {
    const found = table[host];
    if (found === undefined) return Promise.reject(new Error('ENOTFOUND'));
    return Promise.resolve(found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })));
  };

async function refusal(url: string, allowPrivate = false, table: Record<string, string[]> = {}): Promise<{ code: string; message: string; details: unknown }> {
  try {
    await checkWebhookUrl(url, { allowPrivate, resolve: resolver(table) });
  } catch (error) {
    if (isCairnError(error)) return { code: error.code, message: error.message, details: error.details };
    throw error;
  }
  throw new Error(`${url} was accepted`);
}

describe('checkWebhookUrl', () => {
  it('accepts an https URL whose host resolves to public addresses, and returns them to connect to', async () => {
    const checked = await checkWebhookUrl('https://hooks.example.com/cairn?x=1', { allowPrivate: false, resolve: resolver({ 'hooks.example.com': ['93.184.215.14', '2606:2800:220:1::1'] }) });
    expect(checked.url.href).toBe('https://hooks.example.com/cairn?x=1');
    expect(checked.addresses.map((a) => a.address)).toEqual(['93.184.215.14', '2606:2800:220:1::1']);
  });

  it('refuses loopback, private and metadata literals with E_INPUT, naming the class', async () => {
    expect(await refusal('http://127.0.0.1:8080/hook')).toMatchObject({ code: 'E_INPUT', details: { class: 'loopback' } });
    expect(await refusal('http://[::1]:8080/hook')).toMatchObject({ code: 'E_INPUT', details: { class: 'loopback' } });
    expect(await refusal('http://10.0.0.8/hook')).toMatchObject({ code: 'E_INPUT', details: { class: 'private' } });
    expect(await refusal('http://169.254.169.254/latest/meta-data/')).toMatchObject({ code: 'E_INPUT', details: { class: 'metadata' } });
    expect(await refusal('http://[::ffff:169.254.169.254]/')).toMatchObject({ code: 'E_INPUT', details: { class: 'metadata' } });
  });

  it('refuses a name when any of its addresses is not public (a name that hides loopback)', async () => {
    const refused = await refusal('https://sneaky.example.com/', false, { 'sneaky.example.com': ['93.184.215.14', '127.0.0.1'] });
    expect(refused).toMatchObject({ code: 'E_INPUT', details: { host: 'sneaky.example.com', address: '127.0.0.1', class: 'loopback' } });
    expect(refused.message).toContain('CAIRN_WEBHOOKS_ALLOW_PRIVATE');
  });

  it('with private allowed, accepts loopback but still refuses metadata', async () => {
    const checked = await checkWebhookUrl('http://127.0.0.1:9/hook', { allowPrivate: true, resolve: resolver({}) });
    expect(checked.addresses).toEqual([{ address: '127.0.0.1', family: 4 }]);
    const refused = await refusal('http://169.254.169.254/', true);
    expect(refused).toMatchObject({ code: 'E_INPUT', details: { class: 'metadata' } });
    expect(refused.message).not.toContain('CAIRN_WEBHOOKS_ALLOW_PRIVATE');
  });

  it('refuses other schemes, credentials, fragments, junk and names that do not resolve', async () => {
    expect((await refusal('ftp://example.com/')).message).toContain('only http and https');
    expect((await refusal('file:///etc/passwd')).message).toContain('only http and https');
    expect((await refusal('https://user:pw@example.com/')).message).toContain('no credentials');
    expect((await refusal('https://example.com/#x', false, { 'example.com': ['93.184.215.14'] })).message).toContain('no fragment');
    expect((await refusal('not a url')).message).toContain('not an absolute URL');
    expect((await refusal('https://nowhere.invalid/')).message).toContain('cannot resolve');
    expect((await refusal(`https://example.com/${'a'.repeat(2100)}`)).message).toContain('at most 2048');
  });
});
