import { lookup } from 'node:dns/promises';
import { once } from 'node:events';
import { createServer, request as httpRequest } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from 'node:http';
import { connect, isIP } from 'node:net';
import type { Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { Duplex } from 'node:stream';
import { addressAllowed, canonicalAddress, classifyAddress, subnetContains } from './egress-address.js';
import type { EgressDenialReason, ProxyConfig } from './egress-proxy-wire.js';
import { parseConnectTarget, parseHttpTarget } from './egress-request.js';
import type { EgressTarget } from './egress-request.js';

/*
 * The allowlisting proxy itself. It runs in a process of its own, unprivileged
 * (egress-proxy.child.ts, started by egress-proxy-process.ts): everything a sandbox sends it is
 * parsed there, never in the root runtime. Imports nothing beyond node and its own parsers.
 */

/** The addresses of a host name; rejects when it has none. */
export type ResolveHost = (host: string) => Promise<string[]>;

/**
 * The resolver the proxy was handed: the host's own (`getaddrinfo`: /etc/hosts, then DNS, every
 * address), or a fixed table where a name it lacks does not resolve at all — nothing falls through to DNS.
 */
export function resolverFor(config: ProxyConfig['resolver']): ResolveHost {
  if (config.kind === 'static') {
    const table = new Map(config.table);
    return (host) => {
      const addresses = table.get(host);
      return addresses === undefined || addresses.length === 0 ? Promise.reject(new Error(`${host} is not in the egress host table`)) : Promise.resolve([...addresses]);
    };
  }
  return async (host) => {
    const found = await lookup(host, { all: true, verbatim: true });
    if (found.length === 0) throw new Error(`${host} has no address`);
    return found.map((entry) => entry.address);
  };
}

/** Why the proxy refused a connection: the reasons an `egress.denied` receipt carries. */
export type { EgressDenialReason };

export interface EgressDenial {
  /** As the sandbox named it (lower-case; an IPv6 literal without brackets). */
  host: string;
  port: number;
  reason: EgressDenialReason;
}

export interface EgressProxyOptions {
  /** The address to listen on (an internal network's gateway). */
  listenHost: string;
  /** 0 (the default): any free port. */
  listenPort?: number;
  /** `host:port` entries the sandbox may reach, exactly as granted. */
  allow: readonly string[];
  /** Names may resolve to private addresses (never loopback, link-local, metadata or the worker's own). */
  allowPrivate: boolean;
  resolver: ResolveHost;
  /** Only connections from this IPv4 subnet are served (the sandbox's network); others are dropped. */
  clientSubnet: string;
  /** Told of every refusal, before the sandbox has its answer. Must not throw. */
  onDenied: (denial: EgressDenial) => void;
  connectTimeoutMs?: number;
  resolveTimeoutMs?: number;
  /** A tunnel or request with no traffic either way for this long is closed. */
  idleTimeoutMs?: number;
  /** The worker host's own addresses, always refused; default: every interface's now (read per connection). */
  localAddresses?: () => ReadonlySet<string>;
  maxConnections?: number;
}

type Decision = { ok: true; addresses: string[] } | { ok: false; reason: EgressDenialReason; detail: string };

const HOP_BY_HOP = new Set(['connection', 'proxy-connection', 'keep-alive', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

function hostAddresses(): ReadonlySet<string> {
  const out = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const entry of list ?? []) {
      const canonical = canonicalAddress(entry.address);
      if (canonical !== null) out.add(canonical);
    }
  }
  return out;
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The headers to pass on: hop-by-hop ones (and those `Connection` names) dropped. */
function endToEnd(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const named = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter((h) => h !== ''),
  );
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || named.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/**
 * The allowlisting egress proxy of one sandbox (docs/sandbox-hardening.md, "Egress"): HTTP
 * CONNECT tunnels and plain HTTP requests in absolute form, by host name and port. A target not on
 * the allowlist is refused with 403 before anything is resolved; an allowlisted name is resolved
 * here (the sandbox has no resolver), and refused with 403 when any of its addresses is loopback,
 * link-local, metadata, the worker's own, reserved — or private, unless the operator allows it.
 * A name that does not resolve gets 502. Every refusal is reported through `onDenied`.
 */
export class EgressProxy {
  private readonly sockets = new Set<Duplex>();
  private readonly allow: ReadonlySet<string>;
  private readonly fromClient: (address: string) => boolean;
  private readonly localAddresses: () => ReadonlySet<string>;
  private closing: Promise<void> | null = null;

  private constructor(
    private readonly server: Server,
    private readonly options: EgressProxyOptions,
  ) {
    this.allow = new Set(options.allow);
    this.fromClient = subnetContains(options.clientSubnet);
    this.localAddresses = options.localAddresses ?? hostAddresses;
  }

  /** Listens on `listenHost`; rejects when it cannot (the run must not start unconfined). */
  static async start(options: EgressProxyOptions): Promise<EgressProxy> {
    const server = createServer({ requestTimeout: 0 });
    const proxy = new EgressProxy(server, options);
    server.maxConnections = options.maxConnections ?? 256;
    server.on('connection', (socket: Socket) => proxy.accept(socket));
    server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => void proxy.tunnel(req, socket, head));
    server.on('request', (req: IncomingMessage, res: ServerResponse) => void proxy.forward(req, res));
    server.on('clientError', (_error, socket: Duplex) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      else socket.destroy();
    });
    try {
      server.listen(options.listenPort ?? 0, options.listenHost);
      await once(server, 'listening');
    } catch (error) {
      server.close();
      throw new Error(`the egress proxy could not listen on ${options.listenHost}: ${error instanceof Error ? error.message : String(error)}`);
    }
    return proxy;
  }

  get port(): number {
    const address = this.server.address();
    return typeof address === 'object' && address !== null ? address.port : 0;
  }

  get host(): string {
    return this.options.listenHost;
  }

  /** `http://<gateway>:<port>`, what HTTP_PROXY and HTTPS_PROXY say inside the sandbox. */
  get url(): string {
    return `http://${this.options.listenHost}:${this.port}`;
  }

  /** Stops listening and cuts every connection, tunnels included. Idempotent. */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const socket of this.sockets) socket.destroy();
      this.sockets.clear();
    });
    return this.closing;
  }

  private track(socket: Duplex): void {
    if (this.closing !== null) {
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  }

  private accept(socket: Socket): void {
    // Only the sandbox's own network is served (the firewall already stops everyone else).
    if (!this.fromClient(socket.remoteAddress ?? '')) {
      socket.destroy();
      return;
    }
    this.track(socket);
    socket.setTimeout(this.options.idleTimeoutMs ?? 300_000, () => socket.destroy());
  }

  /** Whether `target` may be reached, and at which addresses. */
  private async decide(target: EgressTarget): Promise<Decision> {
    if (!this.allow.has(target.key)) return { ok: false, reason: 'not_allowlisted', detail: `${target.key} is not on this run's egress allowlist` };
    let addresses: string[];
    if (isIP(target.host) !== 0) {
      addresses = [target.host];
    } else {
      try {
        addresses = await withTimeout(this.options.resolver(target.host), this.options.resolveTimeoutMs ?? 5000, `resolving ${target.host}`);
      } catch (error) {
        return { ok: false, reason: 'resolution_failed', detail: `${target.host} did not resolve: ${error instanceof Error ? error.message : String(error)}` };
      }
    }
    const local = this.localAddresses();
    const canonical: string[] = [];
    for (const address of addresses) {
      const text = canonicalAddress(address);
      const cls = text === null ? null : classifyAddress(text);
      // One refused address refuses the name: a name that mixes public and private answers is a rebinding attempt.
      if (text === null || cls === null || local.has(text) || !addressAllowed(cls, this.options.allowPrivate)) {
        const why = text !== null && local.has(text) ? 'an address of the worker host' : `a ${cls ?? 'malformed'} address`;
        return { ok: false, reason: 'private_address', detail: `${target.host} resolves to ${why}` };
      }
      canonical.push(text);
    }
    if (canonical.length === 0) return { ok: false, reason: 'resolution_failed', detail: `${target.host} has no address` };
    return { ok: true, addresses: canonical };
  }

  private denied(target: EgressTarget, decision: Extract<Decision, { ok: false }>): void {
    try {
      this.options.onDenied({ host: target.host, port: target.port, reason: decision.reason });
    } catch {
      // Reporting must never take the proxy down; the sandbox has its answer already.
    }
  }

  private static refusal(decision: Extract<Decision, { ok: false }>): { status: number; body: string } {
    const status = decision.reason === 'resolution_failed' ? 502 : 403;
    return { status, body: `cairn egress proxy: refused (E_EGRESS, ${decision.reason}): ${decision.detail}\n` };
  }

  /** Connects to the first address that answers. */
  private async open(addresses: readonly string[], port: number): Promise<Socket> {
    let last: unknown = new Error('no address');
    for (const address of addresses) {
      const socket = connect({ host: address, port });
      try {
        await withTimeout(once(socket, 'connect'), this.options.connectTimeoutMs ?? 10_000, `connecting to ${address}:${port}`);
        return socket;
      } catch (error) {
        socket.destroy();
        last = error;
      }
    }
    throw last;
  }

  private async tunnel(req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    this.track(client);
    const target = parseConnectTarget(req.url ?? '');
    if (target === null) {
      client.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\ncairn egress proxy: CONNECT needs host:port\n');
      return;
    }
    const decision = await this.decide(target);
    if (!decision.ok) {
      const { status, body } = EgressProxy.refusal(decision);
      // Reported before answered: the sandbox learns of the refusal only after its owner does.
      this.denied(target, decision);
      client.end(`HTTP/1.1 ${status} ${status === 403 ? 'Forbidden' : 'Bad Gateway'}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      return;
    }
    let upstream: Socket;
    try {
      upstream = await this.open(decision.addresses, target.port);
    } catch {
      client.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\ncairn egress proxy: the host did not answer\n');
      return;
    }
    this.track(upstream);
    if (client.destroyed) {
      upstream.destroy();
      return;
    }
    upstream.setTimeout(this.options.idleTimeoutMs ?? 300_000, () => upstream.destroy());
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
    upstream.once('close', () => client.destroy());
    client.once('close', () => upstream.destroy());
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const target = parseHttpTarget(req.url ?? '');
    if (target === null) {
      res.writeHead(400, { 'content-type': 'text/plain', connection: 'close' }).end('cairn egress proxy: send an absolute http:// URL, or CONNECT for anything else\n');
      return;
    }
    const decision = await this.decide(target);
    if (!decision.ok) {
      const { status, body } = EgressProxy.refusal(decision);
      this.denied(target, decision);
      res.writeHead(status, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) }).end(body);
      req.resume();
      return;
    }
    let upstream: Socket;
    try {
      upstream = await this.open(decision.addresses, target.port);
    } catch {
      res.writeHead(502, { 'content-type': 'text/plain', connection: 'close' }).end('cairn egress proxy: the host did not answer\n');
      req.resume();
      return;
    }
    this.track(upstream);
    const headers = { ...endToEnd(req.headers), host: target.hostHeader };
    // The connection is ours, made to the address judged above: nothing resolves the name again.
    const outgoing = httpRequest({ createConnection: () => upstream, method: req.method, path: target.path, headers, setHost: false });
    outgoing.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEnd(answer.headers));
      answer.pipe(res);
    });
    outgoing.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain', connection: 'close' }).end('cairn egress proxy: the host failed\n');
      else res.destroy();
    });
    res.once('close', () => upstream.destroy());
    req.pipe(outgoing);
  }
}
