import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, openSync, closeSync, readFileSync } from 'node:fs';
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/*
 * nats-server processes of a test's (or a benchmark's) own: one node, or a three-node JetStream
 * cluster, on loopback, on free ports, with stores in a temp directory — never the machine's shared
 * server on 4222. They run the binary `tools/ensure-services.sh` builds, pinned in deploy/nats/VERSION,
 * and the sync policy in deploy/nats/sync.conf.
 */

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const VERSION_FILE = join(REPO_ROOT, 'deploy', 'nats', 'VERSION');
const SYNC_CONF = join(REPO_ROOT, 'deploy', 'nats', 'sync.conf');

/** The pinned nats-server where `tools/ensure-services.sh` installs it; a clear error when it is not there. */
export function pinnedNatsServerBinary(): string {
  const version = readFileSync(VERSION_FILE, 'utf8').trim();
  const bin = join(process.env.CAIRN_TOOLS_DIR ?? '/var/cache/cairn', 'nats-server', version, 'nats-server');
  if (!existsSync(bin)) {
    throw new Error(
      `nats-server ${version} (deploy/nats/VERSION) is not at ${bin}: run \`bash tools/ensure-services.sh\` as root — it builds it from the Go module proxy — or set CAIRN_TOOLS_DIR to where it is`,
    );
  }
  return bin;
}

export interface NatsServersOptions {
  /** 1: one server; 3: a JetStream cluster of three. Default 3. */
  nodes?: 1 | 3;
  /** `always`: deploy/nats/sync.conf (every write fsynced before its ack); `default`: nats-server's own (every 2 min). Default `always`. */
  sync?: 'always' | 'default';
  /** Names the servers and the cluster (`<label>-n1`, …). */
  label?: string;
  /**
   * An authorization include (`cairn nats-auth`'s auth.conf) the servers load: copied beside their
   * configs, since nats-server includes only relative paths. Absent: no authentication.
   */
  authorizationFile?: string;
  /**
   * Each node's store on a tmpfs of this many MiB of the test's own (mounted as root; `stop()`
   * unmounts it), with JetStream's own limit set far above it: the disk fills before JetStream thinks
   * it is full, as a real disk does. Absent: the store is a directory of the temp dir.
   */
  storeSizeMiB?: number;
  /**
   * The address clients connect to (default 127.0.0.1): a test's own address on a veth pair it made,
   * so that a process in its network namespace reaches the server only over that link.
   */
  clientHost?: string;
}

export interface NatsNode {
  /** The server's name, as JetStream's cluster info reports it. */
  readonly name: string;
  readonly url: string;
  readonly storeDir: string;
  /** Its pid while it runs. */
  pid(): number | null;
  running(): boolean;
  /** Sends `signal` (SIGKILL: as a crash would) and waits for the process to end. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same ports and store. */
  start(): Promise<void>;
}

/** A stream's placement as the servers report it. */
export interface StreamPlacement {
  leader: string | null;
  replicas: { name: string; current: boolean; offline: boolean; lag: number }[];
}

export interface NatsServers {
  readonly nodes: readonly NatsNode[];
  /** Every server's URL, comma-separated, as CAIRN_NATS_URL takes them. */
  readonly urls: string;
  readonly dir: string;
  node(name: string): NatsNode;
  /** The name of the meta leader once every running node agrees on one (null for one node). */
  waitForMetaLeader(timeoutMs?: number): Promise<string | null>;
  /** Where `stream` (of the default account) lives, asked of a running node's monitoring endpoint. */
  streamPlacement(stream: string): Promise<StreamPlacement | null>;
  /** A node's monitoring endpoint (`/varz`, `/jsz?…`) as JSON; null when it does not answer. */
  monitor<T>(name: string, path: string): Promise<T | null>;
  /** The last lines of a node's log, for failure messages. */
  logTail(name: string, lines?: number): Promise<string>;
  /** Kills every server and removes the stores. */
  stop(): Promise<void>;
}

interface NodePorts {
  client: number;
  cluster: number;
  http: number;
}

/**
 * `count` distinct free loopback ports: every listener is held until all are bound, so no two of
 * them can be the same port (one at a time, the kernel may hand out a just-released one again).
 */
async function freePorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer());
  try {
    const ports: number[] = [];
    for (const server of servers) {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', resolve);
      });
      const address = server.address();
      if (address === null || typeof address === 'string') throw new Error('no free loopback port');
      ports.push(address.port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()))));
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function monitor<T>(port: number, path: string): Promise<T | null> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(2_000) });
    if (!response.ok) {
      await response.body?.cancel();
      return null;
    }
    return (await response.json()) as T;
  } catch {
    return null;
  }
}

class ServerProcess implements NatsNode {
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();

  constructor(
    private readonly bin: string,
    readonly name: string,
    readonly ports: NodePorts,
    readonly config: string,
    readonly storeDir: string,
    readonly logFile: string,
    private readonly clientHost: string = '127.0.0.1',
  ) {}

  get url(): string {
    return `nats://${this.clientHost}:${this.ports.client}`;
  }

  pid(): number | null {
    return this.running() ? (this.child?.pid ?? null) : null;
  }

  running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  async start(): Promise<void> {
    if (this.running()) return;
    const log = openSync(this.logFile, 'a');
    try {
      const child = spawn(this.bin, ['-c', this.config], { stdio: ['ignore', log, log] });
      this.child = child;
      this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    } finally {
      closeSync(log);
    }
    const deadline = Date.now() + 20_000;
    while ((await monitor<unknown>(this.ports.http, '/varz')) === null) {
      if (!this.running()) throw new Error(`nats-server ${this.name} exited at start:\n${await readFile(this.logFile, 'utf8').catch(() => '')}`);
      if (Date.now() > deadline) throw new Error(`nats-server ${this.name} did not answer on 127.0.0.1:${this.ports.http} within 20 s`);
      await sleep(50);
    }
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (!this.running()) return;
    this.child?.kill(signal);
    await this.exited;
  }
}

interface Jsz {
  meta_cluster?: { leader?: string; replicas?: { name: string; current: boolean }[] };
  account_details?: {
    name: string;
    stream_detail?: { name: string; cluster?: { leader?: string; replicas?: { name: string; current: boolean; offline?: boolean; lag?: number }[] } }[];
  }[];
}

/**
 * Starts nats-server processes of the caller's own (see the file's comment) and waits until they
 * answer — and, for a cluster, until every node agrees on a meta leader. `stop()` kills them and
 * removes their stores; call it in `afterAll`.
 */
const execFileAsync = promisify(execFile);

async function mountTmpfs(dir: string, sizeMiB: number): Promise<void> {
  if (!Number.isSafeInteger(sizeMiB) || sizeMiB < 8) throw new Error(`a store of at least 8 MiB, not ${sizeMiB}`);
  await execFileAsync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMiB}m,mode=0700`, 'tmpfs', dir]).catch((error: unknown) => {
    throw new Error(`cannot mount a tmpfs of ${sizeMiB} MiB at ${dir} (root is needed): ${String(error)}`);
  });
}

async function unmount(dir: string): Promise<void> {
  await execFileAsync('umount', [dir]).catch(() => undefined);
}

export async function startNatsServers(options: NatsServersOptions = {}): Promise<NatsServers> {
  const bin = pinnedNatsServerBinary();
  const count = options.nodes ?? 3;
  const label = (options.label ?? 'cairn-test').replace(/[^A-Za-z0-9_-]/g, '-');
  const dir = await mkdtemp(join(tmpdir(), `${label}-nats-`));
  const sync = options.sync ?? 'always';
  // The deployed sync policy, copied beside the configs (nats-server includes only relative paths).
  if (sync === 'always') await writeFile(join(dir, 'sync.conf'), await readFile(SYNC_CONF, 'utf8'));
  if (options.authorizationFile !== undefined) await writeFile(join(dir, 'auth.conf'), await readFile(options.authorizationFile, 'utf8'));
  const ports: NodePorts[] = [];
  const free = await freePorts(count * 3);
  for (let i = 0; i < count; i++) ports.push({ client: free[3 * i]!, cluster: free[3 * i + 1]!, http: free[3 * i + 2]! });
  const nodes: ServerProcess[] = [];
  for (const [i, port] of ports.entries()) {
    const name = `${label}-n${i + 1}`;
    const storeDir = join(dir, `store-n${i + 1}`);
    await mkdir(storeDir);
    if (options.storeSizeMiB !== undefined) await mountTmpfs(storeDir, options.storeSizeMiB);
    const lines = [
      `server_name: "${name}"`,
      `listen: ${options.clientHost ?? '127.0.0.1'}:${port.client}`,
      `http: 127.0.0.1:${port.http}`,
      'max_payload: 4MB',
      ...(options.authorizationFile === undefined ? [] : ['include ./auth.conf']),
      'jetstream {',
      `  store_dir: "${storeDir}"`,
      ...(options.storeSizeMiB === undefined ? [] : ['  max_file_store: 64GB']),
      ...(sync === 'always' ? ['  include ./sync.conf'] : []),
      '}',
    ];
    if (count > 1) {
      lines.push(
        'cluster {',
        `  name: "${label}"`,
        `  listen: 127.0.0.1:${port.cluster}`,
        '  routes: [',
        ...ports.map((p) => `    nats-route://127.0.0.1:${p.cluster}`),
        '  ]',
        '}',
      );
    }
    const config = join(dir, `n${i + 1}.conf`);
    await writeFile(config, `${lines.join('\n')}\n`);
    nodes.push(new ServerProcess(bin, name, port, config, storeDir, join(dir, `n${i + 1}.log`), options.clientHost));
  }

  const byName = (name: string): ServerProcess => {
    const node = nodes.find((n) => n.name === name);
    if (node === undefined) throw new Error(`no nats-server named ${name} (${nodes.map((n) => n.name).join(', ')})`);
    return node;
  };
  const servers: NatsServers = {
    nodes,
    urls: nodes.map((n) => n.url).join(','),
    dir,
    node: byName,
    async waitForMetaLeader(timeoutMs = 30_000) {
      if (count === 1) return null;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const running = nodes.filter((n) => n.running());
        const views = await Promise.all(running.map((n) => monitor<Jsz>(n.ports.http, '/jsz')));
        const names = new Set(views.map((jsz) => jsz?.meta_cluster?.leader ?? ''));
        const [leader] = [...names];
        // The leader must also count every other running node as a current peer, or it cannot place
        // a stream of as many replicas yet ("no suitable peers for placement").
        const leaderView = views[running.findIndex((n) => n.name === leader)]?.meta_cluster?.replicas ?? [];
        const peers = leaderView.filter((r) => r.current && running.some((n) => n.name === r.name)).length;
        if (names.size === 1 && leader !== undefined && leader !== '' && peers === running.length - 1) return leader;
        if (Date.now() > deadline) throw new Error(`the nats-servers agreed on no meta leader within ${timeoutMs} ms (they say ${JSON.stringify([...names])})`);
        await sleep(100);
      }
    },
    async streamPlacement(stream) {
      for (const node of nodes.filter((n) => n.running())) {
        const jsz = await monitor<Jsz>(node.ports.http, '/jsz?accounts=true&streams=true');
        const found = jsz?.account_details?.flatMap((a) => a.stream_detail ?? []).find((s) => s.name === stream);
        if (found === undefined) continue;
        const leader = found.cluster?.leader ?? null;
        // The node asked lists the others as replicas; itself it lists as leader or not at all.
        const replicas = (found.cluster?.replicas ?? []).map((r) => ({ name: r.name, current: r.current, offline: r.offline === true, lag: r.lag ?? 0 }));
        if (leader !== null && leader === node.name) return { leader, replicas };
      }
      return null;
    },
    monitor: <T>(name: string, path: string) => monitor<T>(byName(name).ports.http, path),
    async logTail(name, lines = 30) {
      const text = await readFile(byName(name).logFile, 'utf8').catch(() => '');
      return text.trimEnd().split('\n').slice(-lines).join('\n');
    },
    async stop() {
      await Promise.all(nodes.map((n) => n.kill('SIGKILL')));
      if (options.storeSizeMiB !== undefined) for (const node of nodes) await unmount(node.storeDir);
      await rm(dir, { recursive: true, force: true });
    },
  };
  try {
    for (const node of nodes) await node.start();
    await servers.waitForMetaLeader();
  } catch (error) {
    await servers.stop();
    throw error;
  }
  return servers;
}
