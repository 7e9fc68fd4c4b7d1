import { CairnError } from '@cairn/contracts';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { BoundedLines, MAX_LINE_BYTES, parseProxyMessage, wireResolver, type ProxyConfig, type ProxyMessage, type ProxySync } from './egress-proxy-wire.js';
import type { EgressDenial } from './egress-proxy.js';
import type { EgressResolver } from './egress-resolver.js';

/*
 * The runtime's side of a sandbox's egress proxy. The proxy is a child process of its own
 * (egress-proxy.child.ts, run with `process.execPath`), as a dedicated unprivileged user — never
 * root, never the sandbox's user — so what a sandbox sends it (CONNECT lines, HTTP requests, host
 * names) is parsed outside the root runtime. The runtime hears back only bounded, checked lines
 * (egress-proxy-wire.ts): the port it listens on, and each refusal's host, port and reason.
 *
 * If the process dies, egress for that sandbox fails closed: the firewall lets the sandbox reach
 * only the proxy's port, where nothing answers now — and this process holds that port itself
 * (accepting and dropping every connection, reading nothing) so nothing else can take it.
 */

/** The proxy's user unless configured: unused by Debian (65000–65533 is reserved), outside systemd's dynamic range. */
export const DEFAULT_EGRESS_PROXY_USER = Object.freeze({ uid: 65_530, gid: 65_530 });

/** The compiled entry point, next to this package's `dist/` (tests run the sources; the child runs the build). */
export const EGRESS_PROXY_ENTRY = fileURLToPath(new URL('../dist/egress-proxy.child.js', import.meta.url));

const START_TIMEOUT_MS = 10_000;
/** A sync the proxy does not answer in this long is given up on (a proxy that slow is as good as lost). */
const SYNC_TIMEOUT_MS = 2_000;
const STOP_TIMEOUT_MS = 2_000;
const MAX_STDERR_BYTES = 2048;

export interface EgressProxyProcessOptions {
  listenHost: string;
  allow: readonly string[];
  allowPrivate: boolean;
  resolver: EgressResolver;
  clientSubnet: string;
  /** Who the proxy runs as; null: this process's own user (only when it is not root). */
  user: { uid: number; gid: number } | null;
  /** Told of every refusal. Must not throw. */
  onDenied: (denial: EgressDenial) => void;
  /** Told once when the proxy ended without being closed (egress then fails closed). Must not throw. */
  onLost: (reason: string) => void;
  /** Default EGRESS_PROXY_ENTRY. */
  entry?: string;
  /** The Node.js binary that runs it; default `process.execPath`. */
  execPath?: string;
}

type ProxyChild = ChildProcessByStdio<Writable, Readable, Readable>;

function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return signal !== null ? `killed by ${signal}` : `exited with ${String(code)}`;
}

/** A running egress proxy process. */
export class EgressProxyProcess {
  private closing: Promise<void> | null = null;
  private exited = false;
  private placeholder: Server | null = null;
  private lostReason: string | null = null;
  private nextSync = 0;
  private readonly syncs = new Map<number, () => void>();

  private constructor(
    private readonly child: ProxyChild,
    readonly host: string,
    readonly port: number,
    private readonly options: EgressProxyProcessOptions,
  ) {}

  /**
   * Starts the proxy and waits until it listens; `E_SANDBOX_START` when it cannot (nothing is
   * left running), so a sandbox granted egress never starts without its proxy.
   */
  static async start(options: EgressProxyProcessOptions): Promise<EgressProxyProcess> {
    const entry = options.entry ?? EGRESS_PROXY_ENTRY;
    if (!existsSync(entry)) throw new CairnError('E_SANDBOX_START', `the egress proxy is not built (${entry}): run npm run build`);
    const root = process.getuid?.() === 0;
    if (root && options.user === null) throw new CairnError('E_SANDBOX_START', 'the egress proxy must not run as root: give it a user of its own');
    if (options.user !== null && (options.user.uid <= 0 || options.user.gid <= 0)) throw new CairnError('E_SANDBOX_START', 'the egress proxy must not run as root');
    const config: ProxyConfig = {
      listenHost: options.listenHost,
      allow: [...options.allow],
      allowPrivate: options.allowPrivate,
      clientSubnet: options.clientSubnet,
      resolver: wireResolver(options.resolver),
    };
    let child: ProxyChild;
    try {
      // Nothing of the runtime's environment (database URLs, keys) reaches it; `/` as its directory.
      // A bounded heap and no eval: a proxy that is attacked stays small and runs only its own code.
      // From a root runtime it starts as root and becomes its user itself once its code is loaded
      // (egress-proxy.child.ts): the node binary and the entry may sit where that user cannot go.
      const as = root && options.user !== null ? [`--user=${options.user.uid}:${options.user.gid}`] : [];
      child = spawn(options.execPath ?? process.execPath, ['--max-old-space-size=96', '--disallow-code-generation-from-strings', entry, ...as], {
        cwd: '/',
        env: {},
        stdio: ['pipe', 'pipe', 'pipe'],
      });
    } catch (error) {
      throw new CairnError('E_SANDBOX_START', `the egress proxy could not be started: ${error instanceof Error ? error.message : String(error)}`);
    }
    const stderr: Buffer[] = [];
    let stderrBytes = 0;
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderrBytes < MAX_STDERR_BYTES) stderr.push(chunk.subarray(0, MAX_STDERR_BYTES - stderrBytes));
      stderrBytes += chunk.length;
    });
    child.stdin.on('error', () => undefined);

    let proxy: EgressProxyProcess | null = null;
    let heardListening = false;
    let listening: (port: number) => void = () => undefined;
    let refused: (why: string) => void = () => undefined;
    const started = new Promise<number>((resolve, reject) => {
      listening = resolve;
      refused = (why) => reject(new Error(why));
    });
    // What comes after `listening` but before the proxy object exists waits for it, in order.
    const early: (() => void)[] = [];
    const later = (act: (p: EgressProxyProcess) => void) => {
      if (proxy !== null) act(proxy);
      else early.push(() => act(proxy!));
    };
    const misbehaved = (why: string) => {
      child.kill('SIGKILL');
      if (heardListening) later((p) => p.lose(why));
      else refused(why);
    };
    const lines = new BoundedLines(
      MAX_LINE_BYTES,
      (line) => {
        const message = parseProxyMessage(line);
        if (message === null) return misbehaved('the egress proxy sent something that is not one of its messages');
        if (!heardListening) {
          if (message.t !== 'listening') return refused(message.t === 'failed' ? message.message : 'the egress proxy reported before it listened');
          heardListening = true;
          listening(message.port);
          return;
        }
        later((p) => p.take(message));
      },
      () => misbehaved(`the egress proxy sent a line longer than ${MAX_LINE_BYTES} bytes`),
    );
    child.stdout.on('data', (chunk: Buffer) => lines.push(chunk));
    child.once('error', (error) => refused(error.message));
    child.once('exit', (code, signal) => {
      if (heardListening) later((p) => p.ended(code, signal));
      else refused(`it ${describeExit(code, signal)}`);
    });

    child.stdin.write(`${JSON.stringify(config)}\n`);
    let timer: NodeJS.Timeout | undefined;
    try {
      const port = await Promise.race([
        started,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`it did not listen within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
        }),
      ]);
      proxy = new EgressProxyProcess(child, options.listenHost, port, options);
      for (const act of early.splice(0)) act();
      return proxy;
    } catch (error) {
      child.kill('SIGKILL');
      const said = Buffer.concat(stderr).toString('utf8').trim().slice(0, 500);
      const why = error instanceof Error ? error.message : String(error);
      throw new CairnError('E_SANDBOX_START', `the egress proxy could not start and listen on ${options.listenHost}: ${why}${said === '' ? '' : ` (${said})`}`, { host: options.listenHost });
    } finally {
      clearTimeout(timer);
    }
  }

  /** `http://<gateway>:<port>`, what HTTP_PROXY and HTTPS_PROXY say inside the sandbox. */
  get url(): string {
    return `http://${this.host}:${this.port}`;
  }

  /** The proxy's process id on the host (for tests and logs). */
  get pid(): number | null {
    return this.child.pid ?? null;
  }

  /** Still running and not closed. */
  get alive(): boolean {
    return !this.exited && this.lostReason === null && this.closing === null;
  }

  /**
   * Resolves once every refusal the proxy answered so far has been reported (`onDenied` called):
   * called at the end of each step, so a step's refusals are heard while it is the step running.
   * Resolves at once when the proxy is gone, and after SYNC_TIMEOUT_MS at the latest.
   */
  flush(): Promise<void> {
    if (!this.alive) return Promise.resolve();
    const n = this.nextSync++;
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.syncs.delete(n);
        resolve();
      };
      const timer = setTimeout(done, SYNC_TIMEOUT_MS);
      this.syncs.set(n, done);
      this.child.stdin.write(`${JSON.stringify({ t: 'sync', n } satisfies ProxySync)}\n`);
    });
  }

  /** Stops the proxy (cutting every tunnel) and lets go of its port. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (!this.exited) {
        const exit = once(this.child, 'exit').catch(() => undefined);
        this.child.stdin.end();
        const timer = setTimeout(() => this.child.kill('SIGKILL'), STOP_TIMEOUT_MS);
        await exit;
        clearTimeout(timer);
      }
      this.releaseSyncs();
      const placeholder = this.placeholder;
      this.placeholder = null;
      if (placeholder !== null) await new Promise<void>((resolve) => placeholder.close(() => resolve()));
    })();
    return this.closing;
  }

  private releaseSyncs(): void {
    for (const done of [...this.syncs.values()]) done();
  }

  private take(message: ProxyMessage): void {
    if (message.t === 'synced') {
      this.syncs.get(message.n)?.();
      return;
    }
    if (message.t !== 'denied') return this.lose(`the egress proxy sent ${message.t} after it listened`);
    try {
      this.options.onDenied({ host: message.host, port: message.port, reason: message.reason });
    } catch {
      // Reporting must never take the proxy down.
    }
  }

  private ended(code: number | null, signal: NodeJS.Signals | null): void {
    this.exited = true;
    if (this.closing === null) this.lose(`the egress proxy ${describeExit(code, signal)}`);
  }

  /** The proxy is gone or not to be trusted: it is stopped, its port held, and the owner told once. */
  private lose(reason: string): void {
    if (this.lostReason !== null || this.closing !== null) return;
    this.lostReason = reason;
    this.releaseSyncs();
    if (!this.exited) this.child.kill('SIGKILL');
    void this.holdPort().then((held) => {
      try {
        this.options.onLost(held ? reason : `${reason}; its port could not be held (something else listens there now)`);
      } catch {
        // The owner's listener must not throw; nothing to do if it does.
      }
    });
  }

  /** Listens on the proxy's address and port, dropping every connection unread; false when it cannot. */
  private async holdPort(): Promise<boolean> {
    if (!this.exited) await once(this.child, 'exit').catch(() => undefined);
    if (this.closing !== null) return true;
    const server = createServer({ pauseOnConnect: true }, (socket) => socket.resetAndDestroy());
    try {
      server.listen(this.port, this.host);
      await once(server, 'listening');
    } catch {
      server.close();
      return false;
    }
    if (this.closing !== null) {
      server.close();
      return true;
    }
    this.placeholder = server;
    return true;
  }
}
