import type { SandboxHandle } from '@cairn/sandbox';
import { uniqueName } from '@cairn/testing';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { AddressInfo, Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX_IMAGE_TAG, DEFAULT_SANDBOX_USER, DockerSandboxDriver, IptablesFirewall, staticResolver } from '../src/index.js';
import type { EgressDenial, EgressFirewall, EgressRequest } from '../src/index.js';
import { codeOf, sandboxFixture, text } from './sandbox.fixture.js';

/*
 * Egress through the allowlisting proxy, on the real engine and the host's iptables. The only
 * server anything talks to is a sink (busybox httpd) this file starts in its own container, on a
 * network it creates; `sink.test` and `evil.test` resolve through a fixed table, never DNS.
 */

const hosts = new Map<string, string[]>();
const fx = sandboxFixture('egr', { egress: { resolver: staticResolver(hosts) } });
const firewall = new IptablesFirewall();
const testLabel = `io.cairn.test=${uniqueName('egr')}`;
let sinkIp = '';

async function startSink(): Promise<void> {
  const network = await fx.docker.createNetwork({ Name: uniqueName('egr-sink'), Driver: 'bridge', Labels: { 'io.cairn.test': testLabel.split('=')[1]! } });
  const container = await fx.docker.createContainer({
    name: uniqueName('egr-sink'),
    Image: BUSYBOX_IMAGE_TAG,
    Labels: { 'io.cairn.test': testLabel.split('=')[1]! },
    Entrypoint: ['sh', '-c', 'mkdir -p /tmp/www && echo sink-ok > /tmp/www/index.html && exec busybox httpd -f -p 8080 -h /tmp/www'],
    HostConfig: { NetworkMode: network.id, CapDrop: ['ALL'] },
  });
  await container.start();
  const info = await container.inspect();
  sinkIp = Object.values(info.NetworkSettings.Networks)[0]?.IPAddress ?? '';
  expect(sinkIp).toMatch(/^[0-9.]+$/);
  for (let i = 0; i < 50; i++) {
    const ok = await fetch(`http://${sinkIp}:8080/`).then((r) => r.ok, () => false);
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the sink did not answer');
}

async function removeTestObjects(): Promise<void> {
  for (const c of await fx.docker.listContainers({ all: true, filters: { label: [testLabel] } })) await fx.docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  for (const n of await fx.docker.listNetworks({ filters: { label: [testLabel] } })) await fx.docker.getNetwork(n.Id).remove().catch(() => undefined);
}

async function networksOf(workerId: string): Promise<string[]> {
  return (await fx.docker.listNetworks({ filters: { label: [`io.cairn.worker=${workerId}`] } })).map((n) => n.Name);
}

/** Whether something listens on ip:port on this host (read from the kernel, no packet sent). */
async function listening(ip: string, port: number): Promise<boolean> {
  const hex = ip
    .split('.')
    .map((b) => Number(b).toString(16).padStart(2, '0'))
    .reverse()
    .join('')
    .toUpperCase();
  const wanted = `${hex}:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const table = await readFile('/proc/net/tcp', 'utf8');
  return table.split('\n').some((line) => {
    const cols = line.trim().split(/\s+/);
    return cols[1] === wanted && cols[3] === '0A';
  });
}

function egress(allowPrivate: boolean, denials: EgressDenial[] = []): EgressRequest {
  return { allow: ['sink.test:8080'], allowPrivate, onDenied: (d) => denials.push(d) };
}

const run = (sandbox: SandboxHandle, argv: string[], timeoutMs = 20_000) => fx.driver.exec(sandbox, { argv, timeoutMs, maxOutputBytes: 1 << 16 });

/** A raw CONNECT through the proxy, then a plain GET inside the tunnel. */
const connectThrough = (target: string) => [
  'sh',
  '-c',
  `p=\${HTTPS_PROXY#http://}; (printf 'CONNECT ${target} HTTP/1.1\\r\\nHost: ${target}\\r\\n\\r\\nGET / HTTP/1.0\\r\\nHost: sink.test\\r\\n\\r\\n'; sleep 2) | busybox nc \${p%:*} \${p##*:}`,
];

let sandbox: SandboxHandle;
const denials: EgressDenial[] = [];

beforeAll(async () => {
  await fx.ready();
  await removeTestObjects();
  await startSink();
  hosts.set('sink.test', [sinkIp]);
  hosts.set('evil.test', [sinkIp]);
  sandbox = await fx.driver.create(fx.spec(), { egress: egress(true, denials) });
});

afterAll(async () => {
  // Also when a test failed before the teardown test: the driver closes what it has open.
  if (sandbox !== undefined) await fx.driver.destroy(sandbox).catch(() => undefined);
  await fx.removeLabelled([fx.workerId]);
  await fx.driver.reconcile(fx.workerId, () => false).catch(() => undefined);
  const leftNetworks = await networksOf(fx.workerId);
  const leftRules = await firewall.list(fx.workerId);
  await removeTestObjects();
  expect(leftNetworks).toEqual([]);
  expect(leftRules).toEqual([]);
});

describe('an egress sandbox', () => {
  it('is on its own internal network with the proxy in its environment and no resolver', async () => {
    const seen = fx.driver.egressOf(sandbox);
    expect(seen).toMatchObject({ network: `cairn-egress-${sandbox.chainId}-1` });
    const info = await fx.docker.getContainer(sandbox.id).inspect();
    expect(info.HostConfig.NetworkMode).toBe(seen?.network);
    expect(Object.keys(info.NetworkSettings.Networks)).toEqual([seen?.network]);
    expect(info.HostConfig.Dns).toEqual(['0.0.0.0']);
    const network = await fx.docker.getNetwork(seen!.network).inspect();
    expect(network).toMatchObject({ Internal: true, Labels: { 'io.cairn.managed': '1', 'io.cairn.worker': fx.workerId, 'io.cairn.chain': sandbox.chainId, 'io.cairn.egress': '1' } });
    const env = text((await run(sandbox, ['env'])).stdout);
    for (const name of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) expect(env).toContain(`${name}=${seen?.proxyUrl}`);
    const lookup = await run(sandbox, ['busybox', 'nslookup', 'sink.test']);
    expect(lookup.exitCode).not.toBe(0);
    expect(text(lookup.stdout)).not.toContain(sinkIp);
  });

  it('reaches an allowlisted host with plain HTTP through the proxy', async () => {
    const result = await run(sandbox, ['busybox', 'wget', '-q', '-O', '-', 'http://sink.test:8080/']);
    expect(text(result.stderr)).toBe('');
    expect(result.exitCode).toBe(0);
    expect(text(result.stdout)).toBe('sink-ok\n');
  });

  it('reaches an allowlisted host through a CONNECT tunnel', async () => {
    const out = text((await run(sandbox, connectThrough('sink.test:8080'))).stdout);
    expect(out).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.[01] 200 OK/);
    expect(out).toContain('sink-ok');
  });

  it('is refused, with 403 and a report, a host not on its allowlist — and keeps running', async () => {
    const before = denials.length;
    const plain = await run(sandbox, ['busybox', 'wget', '-q', '-O', '-', 'http://evil.test:8080/']);
    expect(plain.exitCode).toBe(1);
    expect(text(plain.stderr)).toContain('403 Forbidden');
    expect(text(plain.stdout)).not.toContain('sink-ok');
    const tunnel = text((await run(sandbox, connectThrough('evil.test:8080'))).stdout);
    expect(tunnel).toMatch(/^HTTP\/1\.1 403 Forbidden/);
    expect(tunnel).not.toContain('sink-ok');
    const wrongPort = text((await run(sandbox, connectThrough('sink.test:80'))).stdout);
    expect(wrongPort).toMatch(/^HTTP\/1\.1 403 Forbidden/);
    expect(denials.slice(before)).toEqual([
      { host: 'evil.test', port: 8080, reason: 'not_allowlisted' },
      { host: 'evil.test', port: 8080, reason: 'not_allowlisted' },
      { host: 'sink.test', port: 80, reason: 'not_allowlisted' },
    ]);
    expect(text((await run(sandbox, ['echo', 'still here'])).stdout)).toBe('still here\n');
  });

  // No `wget -T` below: this busybox's wget crashes (SIGSEGV) with a timeout set, which would pass for a refusal.
  it('has no route anywhere but the proxy: the sink by address, the sink by name without the proxy', async () => {
    // The host firewall resets some of these connections and silently drops others (it depends on
    // which rule meets the packet first): either way nothing gets through, and each ends by itself.
    const direct = await run(sandbox, ['busybox', 'nc', '-w', '3', sinkIp, '8080']);
    expect(direct.exitCode).toBe(1);
    expect(text(direct.stderr)).toMatch(/can't connect|timed out/);
    const viaName = await run(sandbox, ['env', '-u', 'http_proxy', '-u', 'HTTP_PROXY', 'busybox', 'wget', '-q', '-O', '-', 'http://sink.test:8080/']);
    expect(viaName.exitCode).toBe(1);
    expect(text(viaName.stderr)).toMatch(/bad address 'sink\.test:8080'/);
    expect(text(viaName.stdout)).toBe('');
    const byAddress = await run(sandbox, ['busybox', 'timeout', '5', 'env', '-u', 'http_proxy', '-u', 'HTTP_PROXY', 'busybox', 'wget', '-q', '-O', '-', `http://${sinkIp}:8080/`]);
    // 1: refused; 143: still waiting on a dropped SYN when `timeout` ended it.
    expect([1, 143]).toContain(byAddress.exitCode);
    if (byAddress.exitCode === 1) expect(text(byAddress.stderr)).toMatch(/can't connect/);
    expect(text(byAddress.stdout)).toBe('');
  });

  it('cannot reach host services on the gateway or on every interface, only the proxy port', async () => {
    const seen = fx.driver.egressOf(sandbox)!;
    const servers: Server[] = [];
    const listen = async (host: string): Promise<number> => {
      const server = createServer((socket) => socket.end('host-service\n'));
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, host, resolve));
      return (server.address() as AddressInfo).port;
    };
    try {
      const onGateway = await listen(seen.gateway);
      const onAll = await listen('0.0.0.0');
      for (const port of [onGateway, onAll]) {
        const result = await run(sandbox, ['busybox', 'nc', '-w', '3', seen.gateway, String(port)]);
        expect(text(result.stdout)).not.toContain('host-service');
        expect(result.exitCode).toBe(1);
        expect(text(result.stderr)).toMatch(/can't connect/);
      }
      // The same client reaches the proxy's port, so the refusals above are the firewall's.
      const proxyPort = new URL(seen.proxyUrl).port;
      const proxy = await run(sandbox, ['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 3 ${seen.gateway} ${proxyPort}`]);
      expect(text(proxy.stdout)).toMatch(/^HTTP\/1\.1 400/);
    } finally {
      for (const server of servers) server.close();
    }
  });

  it('is refused a name that resolves to a private address unless the operator allows it', async () => {
    const strict: EgressDenial[] = [];
    const other = await fx.driver.create(fx.spec(), { egress: egress(false, strict) });
    try {
      const result = await run(other, ['busybox', 'wget', '-q', '-O', '-', 'http://sink.test:8080/']);
      expect(result.exitCode).toBe(1);
      expect(text(result.stderr)).toContain('403 Forbidden');
      expect(strict).toEqual([{ host: 'sink.test', port: 8080, reason: 'private_address' }]);
    } finally {
      expect((await fx.driver.destroy(other)).verifiedGone).toBe(true);
    }
  });

  it('has its proxy in a process of its own: a child of this one, neither root nor the sandbox user', async () => {
    const seen = fx.driver.egressOf(sandbox)!;
    expect(seen.proxyAlive).toBe(true);
    const status = await readFile(`/proc/${seen.proxyPid}/status`, 'utf8');
    expect(Number(/^PPid:\s+(\d+)/m.exec(status)?.[1])).toBe(process.pid);
    const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
    expect([0, DEFAULT_SANDBOX_USER.uid]).not.toContain(uid);
    if (process.getuid?.() === 0) expect(uid).toBe(65_530);
    expect(await readFile(`/proc/${seen.proxyPid}/cmdline`, 'utf8')).toContain('egress-proxy.child.js');
    // The runtime's own process listens on nothing of the sandbox's: the port is the child's.
    expect(await listening(seen.gateway, Number(new URL(seen.proxyUrl).port))).toBe(true);
  });

  it('fails closed when its proxy dies: connections refused, the owner told, the proxy reported gone', async () => {
    const lost: string[] = [];
    const doomed = await fx.driver.create(fx.spec(), { egress: { ...egress(true), onProxyLost: (reason) => lost.push(reason) } });
    try {
      expect(text((await run(doomed, ['busybox', 'wget', '-q', '-O', '-', 'http://sink.test:8080/'])).stdout)).toBe('sink-ok\n');
      const before = fx.driver.egressOf(doomed)!;
      process.kill(before.proxyPid!, 'SIGKILL');
      for (let i = 0; i < 100 && lost.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(lost).toHaveLength(1);
      expect(lost[0]).toContain('SIGKILL');
      expect(fx.driver.egressOf(doomed)).toMatchObject({ proxyAlive: false });
      const plain = await run(doomed, ['busybox', 'wget', '-q', '-O', '-', 'http://sink.test:8080/']);
      expect(plain.exitCode).not.toBe(0);
      expect(text(plain.stdout)).toBe('');
      const tunnel = await run(doomed, connectThrough('sink.test:8080'));
      expect(text(tunnel.stdout)).not.toContain('sink-ok');
      expect(text(tunnel.stdout)).not.toContain('200');
      // Still nothing but the (dead) proxy's port: the sink by address stays out of reach.
      expect((await run(doomed, ['busybox', 'nc', '-w', '3', sinkIp, '8080'])).exitCode).toBe(1);
    } finally {
      expect((await fx.driver.destroy(doomed)).verifiedGone).toBe(true);
    }
    expect(lost).toHaveLength(1);
  });

  it('is torn down whole: sandbox, proxy listener, firewall rules and network', async () => {
    const seen = fx.driver.egressOf(sandbox)!;
    const port = Number(new URL(seen.proxyUrl).port);
    const bridge = (await fx.docker.getNetwork(seen.network).inspect()).Options?.['com.docker.network.bridge.name'];
    expect(await listening(seen.gateway, port)).toBe(true);
    expect(await firewall.list(fx.workerId)).toContain(`cairn-egress:${fx.workerId}:${bridge}`);

    expect(await fx.driver.destroy(sandbox)).toEqual({ verifiedGone: true });
    expect(await fx.engineKnows(sandbox.id)).toBe(false);
    expect(await listening(seen.gateway, port)).toBe(false);
    expect(await firewall.list(fx.workerId)).not.toContain(`cairn-egress:${fx.workerId}:${bridge}`);
    expect(await networksOf(fx.workerId)).not.toContain(seen.network);
    expect(fx.driver.egressOf(sandbox)).toBeNull();
  });
});

describe('egress that cannot be set up', () => {
  it('refuses the sandbox with E_SANDBOX_START and leaves nothing behind', async () => {
    const failing: EgressFirewall = {
      install: () => Promise.reject(new Error('no iptables here')),
      uninstall: () => Promise.resolve(),
      remove: () => Promise.resolve(),
      list: () => Promise.resolve([]),
    };
    const driver = new DockerSandboxDriver({ docker: fx.docker, egress: { resolver: staticResolver(hosts), firewall: failing } });
    const workerId = uniqueName('egr-fail');
    try {
      expect(await codeOf(driver.create(fx.spec({ workerId }), { egress: egress(true) }))).toBe('E_SANDBOX_START');
      expect(await fx.docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${workerId}`] } })).toEqual([]);
      expect(await networksOf(workerId)).toEqual([]);
    } finally {
      await fx.removeLabelled([workerId]);
    }
  });
});

describe('reconcile after a crash', () => {
  it('removes the sandbox, its network and its rules that a dead process left', async () => {
    const workerId = uniqueName('egr-crash');
    const crashed = new DockerSandboxDriver({ docker: fx.docker, egress: { resolver: staticResolver(hosts) } });
    const left = await crashed.create(fx.spec({ workerId }), { egress: egress(true) });
    const network = crashed.egressOf(left)!.network;
    try {
      // A new process: it knows nothing of what the crashed one had open.
      const restarted = new DockerSandboxDriver({ docker: fx.docker });
      const kept = await restarted.reconcile(workerId, (chain) => chain !== left.chainId);
      expect(kept).toEqual([left.name]);
      expect(await fx.engineKnows(left.id)).toBe(false);
      expect(await networksOf(workerId)).toEqual([]);
      expect(await firewall.list(workerId)).toEqual([]);
      expect(network).toBe(`cairn-egress-${left.chainId}-1`);
    } finally {
      // The "crashed" driver's proxy process is this test process's child: it goes with its session.
      await crashed.destroy(left).catch(() => undefined);
      await fx.removeLabelled([workerId]);
      await new DockerSandboxDriver({ docker: fx.docker }).reconcile(workerId, () => false).catch(() => undefined);
    }
  });
});

describe('what egress costs', () => {
  it('adds network, firewall and proxy set-up and teardown to a sandbox; measured against network none', async () => {
    const timed = async (withEgress: boolean): Promise<number> => {
      const started = performance.now();
      const handle = await fx.driver.create(fx.spec(), withEgress ? { egress: egress(true) } : {});
      await fx.driver.destroy(handle);
      return performance.now() - started;
    };
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const none: number[] = [];
    const withEgress: number[] = [];
    for (let i = 0; i < 5; i++) {
      none.push(await timed(false));
      withEgress.push(await timed(true));
    }
    console.info(`egress create+destroy median ${median(withEgress).toFixed(0)} ms, network none ${median(none).toFixed(0)} ms, extra ${(median(withEgress) - median(none)).toFixed(0)} ms`);
    expect(median(withEgress)).toBeGreaterThan(0);
    expect(await networksOf(fx.workerId)).toEqual([]);
  });
});
