import { describe, expect, it } from 'vitest';
import { egressBridgeName, egressNetworkName, proxyEnv } from './egress-network.js';
import { egressRuleDeletions, egressRules, ourRules, parseRuleComment, ruleComment } from './egress-firewall.js';

const RULES = { workerId: 'w-1', bridge: 'cxe-0123456789a', gateway: '172.18.0.1', proxyPort: 40123 };

describe('the host firewall of an egress network', () => {
  it('given a network, when its IPv4 rules are written, then only the proxy port on the gateway is accepted and the rest is refused, proxy rule first', () => {
    const lines = egressRules(RULES).v4.split('\n');
    const tag = '-m comment --comment cairn-egress:w-1:cxe-0123456789a';
    expect(lines).toEqual([
      '*filter',
      `-I INPUT 1 -i cxe-0123456789a ${tag} -j DROP`,
      `-I INPUT 1 -i cxe-0123456789a -p tcp ${tag} -j REJECT --reject-with tcp-reset`,
      `-I INPUT 1 -i cxe-0123456789a -d 172.18.0.1/32 -p tcp -m tcp --dport 40123 ${tag} -j ACCEPT`,
      `-I FORWARD 1 -o cxe-0123456789a ${tag} -j DROP`,
      `-I FORWARD 1 -i cxe-0123456789a ${tag} -j DROP`,
      `-I FORWARD 1 -i cxe-0123456789a -p tcp ${tag} -j REJECT --reject-with tcp-reset`,
      'COMMIT',
      '',
    ]);
    // Inserted at position 1 one after the other: the last written is evaluated first.
    expect(lines.indexOf(`-I INPUT 1 -i cxe-0123456789a -d 172.18.0.1/32 -p tcp -m tcp --dport 40123 ${tag} -j ACCEPT`)).toBeGreaterThan(lines.indexOf(`-I INPUT 1 -i cxe-0123456789a ${tag} -j DROP`));
  });

  it('given a network, when its IPv6 rules are written, then nothing from or to the bridge passes', () => {
    expect(egressRules(RULES).v6.split('\n').filter((l) => l.startsWith('-I'))).toEqual([
      '-I INPUT 1 -i cxe-0123456789a -m comment --comment cairn-egress:w-1:cxe-0123456789a -j DROP',
      '-I FORWARD 1 -o cxe-0123456789a -m comment --comment cairn-egress:w-1:cxe-0123456789a -j DROP',
      '-I FORWARD 1 -i cxe-0123456789a -m comment --comment cairn-egress:w-1:cxe-0123456789a -j DROP',
    ]);
  });

  it('given a network, when its rules are taken back, then each inserted rule is deleted by the same spec', () => {
    const { v4, v6 } = egressRuleDeletions(RULES);
    const inserted = egressRules(RULES);
    expect(v4.split('\n').filter((l) => l.startsWith('-'))).toEqual(inserted.v4.split('\n').filter((l) => l.startsWith('-I')).map((l) => l.replace(/^-I (\w+) 1 /, '-D $1 ')));
    expect(v6).toContain('-D INPUT -i cxe-0123456789a -m comment --comment cairn-egress:w-1:cxe-0123456789a -j DROP');
    expect(`${v4}${v6}`).not.toContain('-I ');
  });

  it('given values that could inject into the rules, when written, then they are refused', () => {
    expect(() => egressRules({ ...RULES, bridge: 'br0 -j ACCEPT' })).toThrow(RangeError);
    expect(() => egressRules({ ...RULES, gateway: '0.0.0.0/0' })).toThrow(RangeError);
    expect(() => egressRules({ ...RULES, proxyPort: 0 })).toThrow(RangeError);
  });

  it('given an iptables -S listing, when read, then only our rules come back, as deletions', () => {
    const listing = [
      '-P INPUT ACCEPT',
      '-A INPUT -d 172.18.0.1/32 -i cxe-0123456789a -p tcp -m tcp --dport 40123 -m comment --comment "cairn-egress:w-1:cxe-0123456789a" -j ACCEPT',
      '-A INPUT -i cxe-0123456789a -m comment --comment cairn-egress:w-1:cxe-0123456789a -j DROP',
      '-A INPUT -i docker0 -m comment --comment "someone else" -j ACCEPT',
      '-A INPUT -i eth0 -j ACCEPT',
    ].join('\n');
    expect(ourRules(listing)).toEqual([
      {
        comment: 'cairn-egress:w-1:cxe-0123456789a',
        deleteLine: '-D INPUT -d 172.18.0.1/32 -i cxe-0123456789a -p tcp -m tcp --dport 40123 -m comment --comment "cairn-egress:w-1:cxe-0123456789a" -j ACCEPT',
      },
      { comment: 'cairn-egress:w-1:cxe-0123456789a', deleteLine: '-D INPUT -i cxe-0123456789a -m comment --comment cairn-egress:w-1:cxe-0123456789a -j DROP' },
    ]);
  });

  it('given comments, when parsed, then worker and bridge come back; others are not ours', () => {
    expect(parseRuleComment(ruleComment('local-abc', 'cxe-0123456789a'))).toEqual({ workerId: 'local-abc', bridge: 'cxe-0123456789a' });
    expect(parseRuleComment('cairn-egress:w:')).toBeNull();
    expect(parseRuleComment('docker')).toBeNull();
  });
});

describe('naming an egress network', () => {
  it('given a chain, when named, then the network follows the sandbox name and the bridge fits IFNAMSIZ', () => {
    const name = egressNetworkName('run_abc', 1);
    expect(name).toBe('cairn-egress-run_abc-1');
    expect(egressBridgeName(name)).toMatch(/^cxe-[0-9a-f]{11}$/);
    expect(egressBridgeName(name)).toBe(egressBridgeName('cairn-egress-run_abc-1'));
    expect(egressBridgeName(name)).not.toBe(egressBridgeName(egressNetworkName('run_abc', 2)));
    expect(() => egressNetworkName('run_A.B', 1)).toThrow(RangeError);
  });

  it('given a proxy URL, when the sandbox environment is made, then both spellings of both variables name it', () => {
    expect(proxyEnv('http://172.18.0.1:40123')).toEqual([
      'HTTP_PROXY=http://172.18.0.1:40123',
      'HTTPS_PROXY=http://172.18.0.1:40123',
      'http_proxy=http://172.18.0.1:40123',
      'https_proxy=http://172.18.0.1:40123',
    ]);
  });
});
