import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { normaliseHost, parseConnectTarget, parseHttpTarget } from './egress-request.js';
import { resolverFor } from './egress-proxy.js';
import { wireResolver } from './egress-proxy-wire.js';
import { parseEgressHosts, staticResolver } from './egress-resolver.js';

describe('what a sandbox asks the egress proxy for', () => {
  it('given CONNECT authorities, when parsed, then host and port come out as allowlists spell them', () => {
    expect(parseConnectTarget('Sink.Test.:8080')).toEqual({ host: 'sink.test', port: 8080, key: 'sink.test:8080' });
    expect(parseConnectTarget('10.0.0.1:443')).toEqual({ host: '10.0.0.1', port: 443, key: '10.0.0.1:443' });
    expect(parseConnectTarget('[::1]:443')).toEqual({ host: '::1', port: 443, key: '[::1]:443' });
  });

  it.each(['sink.test', 'sink.test:', 'sink.test:0', 'sink.test:65536', 'sink.test:80:80', 'a b:80', 'sink.test:+80', '[nope]:80', '[fe80::1%eth0]:80', ':80', 'http://sink.test:80', `${'a'.repeat(64)}.test:80`])(
    'given the CONNECT authority %j, when parsed, then it is refused',
    (authority) => {
      expect(parseConnectTarget(authority)).toBeNull();
    },
  );

  it('given absolute-form http URLs, when parsed, then target, path and Host header come out', () => {
    expect(parseHttpTarget('http://sink.test:8080/a/b?c=1')).toEqual({ host: 'sink.test', port: 8080, key: 'sink.test:8080', path: '/a/b?c=1', hostHeader: 'sink.test:8080' });
    expect(parseHttpTarget('HTTP://Sink.Test/')).toEqual({ host: 'sink.test', port: 80, key: 'sink.test:80', path: '/', hostHeader: 'sink.test' });
    // The URL parser normalises odd IPv4 spellings: the allowlist compares the address, not the disguise.
    expect(parseHttpTarget('http://0x7f.1/')?.key).toBe('127.0.0.1:80');
  });

  it.each(['/relative', 'https://sink.test/', 'http://user:pw@sink.test/', 'ftp://sink.test/', 'http://', 'http://sink.test:99999/'])('given the request target %j, when parsed, then it is refused', (target) => {
    expect(parseHttpTarget(target)).toBeNull();
  });

  it('given host names, when normalised, then they are lower-case without a trailing dot, or null', () => {
    expect(normaliseHost('Files.PythonHosted.org.')).toBe('files.pythonhosted.org');
    expect(normaliseHost('[::1]')).toBe('::1');
    expect(normaliseHost('-bad.example')).toBeNull();
    expect(normaliseHost('')).toBeNull();
  });
});

describe('the egress host table (CAIRN_EGRESS_HOSTS)', () => {
  it('given name=address entries, when parsed, then names map to canonical addresses, several per name allowed', () => {
    const table = parseEgressHosts(' sink.test=172.18.0.2, Mirror.Internal=10.0.0.5,mirror.internal=::ffff:10.0.0.6 ,');
    expect([...table]).toEqual([
      ['sink.test', ['172.18.0.2']],
      ['mirror.internal', ['10.0.0.5', '10.0.0.6']],
    ]);
  });

  it.each(['sink.test', 'sink.test=', '=1.2.3.4', 'sink.test=nope', '1.2.3.4=5.6.7.8', 'bad name=1.2.3.4'])('given %j, when parsed, then it is E_INPUT', (text) => {
    let thrown: unknown;
    try {
      parseEgressHosts(text);
    } catch (error) {
      thrown = error;
    }
    expect(isCairnError(thrown) && thrown.code).toBe('E_INPUT');
  });

  it('given a table, when a name it lacks is resolved, then it fails instead of asking DNS', async () => {
    // The table goes to the proxy's process as it is when the proxy starts; resolved there.
    const resolve = resolverFor(wireResolver(staticResolver(parseEgressHosts('sink.test=172.18.0.2'))));
    await expect(resolve('sink.test')).resolves.toEqual(['172.18.0.2']);
    await expect(resolve('example.com')).rejects.toThrow(/not in the egress host table/);
  });
});
