import { EgressProxy, resolverFor } from './egress-proxy.js';
import type { ProxyConfig, ProxyMessage, ProxySync } from './egress-proxy-wire.js';

/*
 * The egress proxy's own process (docs/sandbox-hardening.md, "Egress"): started by the runtime
 * with `process.execPath`, as an unprivileged user of its own (egress-proxy-process.ts). Reads its
 * configuration as one JSON line on stdin, listens, and reports on stdout — `listening`, then one
 * line per refusal. When stdin ends (the runtime closes it, or the runtime died) it exits at once,
 * cutting every tunnel. Nothing here runs with more than that user's rights.
 */

const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

function report(message: ProxyMessage): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/** The first line on stdin; the stream stays open (its end is the signal to stop). */
function readConfig(): Promise<ProxyConfig> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      const newline = chunk.indexOf(0x0a);
      chunks.push(newline === -1 ? chunk : chunk.subarray(0, newline));
      size += chunk.length;
      if (size > MAX_CONFIG_BYTES) return done(new Error('configuration too large'));
      if (newline !== -1) done(null);
    };
    const onEnd = () => done(new Error('no configuration on stdin'));
    const done = (error: Error | null) => {
      process.stdin.off('data', onData);
      process.stdin.off('end', onEnd);
      process.stdin.pause();
      if (error !== null) return reject(error);
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as ProxyConfig);
      } catch (parseError) {
        reject(parseError instanceof Error ? parseError : new Error(String(parseError)));
      }
    };
    process.stdin.on('data', onData);
    process.stdin.on('end', onEnd);
  });
}

/**
 * Started by a root runtime, the proxy becomes its own user here, once its code is loaded and
 * before it reads a byte of configuration or opens a socket: spawned as that user, it could not
 * even be executed from a checkout under a directory only root may enter (`/root`, a 0700
 * `mktemp -d`). Started as root without a user (or the drop does not hold), it does not run.
 */
function dropRoot(): void {
  if (process.getuid?.() !== 0) return;
  const as = /^--user=(\d+):(\d+)$/.exec(process.argv[2] ?? '');
  const [uid, gid] = as === null ? [0, 0] : [Number(as[1]), Number(as[2])];
  if (uid <= 0 || gid <= 0) {
    report({ t: 'failed', message: 'the egress proxy refuses to run as root' });
    process.exit(1);
  }
  process.setgroups!([]);
  process.setgid!(gid);
  process.setuid!(uid);
  if (process.getuid() !== uid || process.geteuid!() !== uid || process.getgid!() !== gid || process.getegid!() !== gid || process.getgroups!().some((g) => g !== gid)) {
    report({ t: 'failed', message: 'the egress proxy could not give up root' });
    process.exit(1);
  }
}

async function main(): Promise<void> {
  dropRoot();
  const config = await readConfig();
  const proxy = await EgressProxy.start({
    listenHost: config.listenHost,
    allow: config.allow,
    allowPrivate: config.allowPrivate,
    resolver: resolverFor(config.resolver),
    clientSubnet: config.clientSubnet,
    onDenied: (denial) => report({ t: 'denied', host: denial.host, port: denial.port, reason: denial.reason }),
  });
  report({ t: 'listening', port: proxy.port });
  // The runtime's end of stdin closing is the only way to stop: at once, every connection with it.
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('close', () => process.exit(0));
  // After the configuration only `sync` lines come; each is answered in order, after every refusal before it.
  let pending = '';
  process.stdin.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8');
    if (pending.length > MAX_CONFIG_BYTES) process.exit(1);
    for (let newline = pending.indexOf('\n'); newline !== -1; newline = pending.indexOf('\n')) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      const sync = JSON.parse(line) as ProxySync;
      if (sync.t === 'sync' && Number.isSafeInteger(sync.n)) report({ t: 'synced', n: sync.n });
    }
  });
  process.stdin.resume();
}

main().catch((error: unknown) => {
  report({ t: 'failed', message: error instanceof Error ? error.message : String(error) });
  process.exit(1);
});
