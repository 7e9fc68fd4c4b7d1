import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { promisify } from 'node:util';

const run = promisify(execFile);

/*
 * A network namespace of a test's own, joined to the host by one veth pair with addresses in a
 * private /30 (10.231.x.y): a process started in it has its own loopback and that link, nothing
 * else, so whatever it reaches it reaches over the veth. Needs root and iproute2 (`ip`).
 */

export interface NetworkNamespace {
  /** `cairn-t-<hex>`. */
  readonly name: string;
  /** The host end's address: what a server of the test's binds to for the namespace to reach it. */
  readonly hostAddress: string;
  /** The namespace end's address. */
  readonly namespaceAddress: string;
  /** Starts `argv` inside the namespace (`ip netns exec`, which execs: the child's pid is the program's). */
  spawn(argv: readonly string[], env: Record<string, string>): ChildProcess;
  /** Whether a TCP connection from inside the namespace to `host:port` is accepted within 3 s. */
  reaches(host: string, port: number): Promise<boolean>;
  /** Deletes the namespace (its veth end goes with it, and the host end with that); safe to call twice. */
  dispose(): Promise<void>;
}

async function ip(...args: string[]): Promise<string> {
  return (await run('ip', args)).stdout;
}

/** A /30 no interface of the host has yet: 10.231.<0–255>.<4k>, the host at .4k+1, the namespace at .4k+2. */
async function freeSubnet(): Promise<{ host: string; ns: string }> {
  const used = await ip('-o', '-4', 'addr', 'show');
  for (let attempt = 0; attempt < 32; attempt++) {
    const third = randomInt(0, 256);
    const base = randomInt(0, 64) * 4;
    const prefix = `10.231.${third}.`;
    const taken = [0, 1, 2, 3].some((d) => used.includes(` ${prefix}${base + d}/`));
    if (!taken) return { host: `${prefix}${base + 1}`, ns: `${prefix}${base + 2}` };
  }
  throw new Error('no free /30 in 10.231.0.0/16 after 32 tries');
}

export async function createNetworkNamespace(): Promise<NetworkNamespace> {
  const id = randomBytes(4).toString('hex');
  const name = `cairn-t-${id}`;
  const hostEnd = `ct${id}h`;
  const nsEnd = `ct${id}n`;
  const { host, ns } = await freeSubnet();
  let disposed = false;
  const dispose = async (): Promise<void> => {
    if (disposed) return;
    disposed = true;
    await ip('netns', 'del', name).catch(() => '');
    // The host end goes with its peer, a moment later; removed here should it linger.
    await ip('link', 'del', hostEnd).catch(() => '');
  };
  try {
    await ip('netns', 'add', name);
    await ip('link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', nsEnd);
    await ip('link', 'set', nsEnd, 'netns', name);
    await ip('addr', 'add', `${host}/30`, 'dev', hostEnd);
    await ip('link', 'set', hostEnd, 'up');
    await ip('-n', name, 'addr', 'add', `${ns}/30`, 'dev', nsEnd);
    await ip('-n', name, 'link', 'set', nsEnd, 'up');
    await ip('-n', name, 'link', 'set', 'lo', 'up');
  } catch (error) {
    await dispose();
    throw error;
  }
  return {
    name,
    hostAddress: host,
    namespaceAddress: ns,
    spawn(argv, env) {
      return spawn('ip', ['netns', 'exec', name, ...argv], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    },
    async reaches(target, port) {
      const probe = `require('node:net').connect({ host: ${JSON.stringify(target)}, port: ${port}, timeout: 3000 }).on('connect', () => process.exit(0)).on('error', () => process.exit(1)).on('timeout', () => process.exit(1))`;
      try {
        await run('ip', ['netns', 'exec', name, process.execPath, '-e', probe], { timeout: 10_000 });
        return true;
      } catch {
        return false;
      }
    },
    dispose,
  };
}
