import { CairnError } from '@cairn/contracts';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { constants, existsSync } from 'node:fs';
import { chmod, lchown, lstat, mkdir, open, readdir, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Duplex } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type Docker from 'dockerode';
import type { OutputSink } from './exec-output.js';

/*
 * The host side of the in-sandbox exec agent (agent/cairn-agent.c, docs/adr/0005-exec-agent.md).
 * A sandbox's main process is the agent; before the container starts, the host listens on a unix
 * socket in a directory of its own for that sandbox, bind-mounted read-only into it. The agent
 * connects once, before any untrusted code runs, and every step then goes over that connection
 * instead of a `docker exec` (≈ 45 ms each here). A second connection is refused: whatever the
 * sandbox starts later cannot stand in for the agent. The first must present a per-sandbox token
 * the host wrote to the agent's stdin through the engine, or the sandbox does not start.
 */

/** Where the agent and its socket appear inside the sandbox. */
export const AGENT_PATH_IN_SANDBOX = '/.cairn/agent';
export const AGENT_DIR_IN_SANDBOX = '/.cairn/run';
const SOCKET_NAME = 'a.sock';
export const AGENT_SOCKET_IN_SANDBOX = `${AGENT_DIR_IN_SANDBOX}/${SOCKET_NAME}`;

const HELLO = 'cairn-agent/2';
const TOKEN_BYTES = 32;
const MAX_FRAME = 64 * 1024 * 1024;
const STDIN_CHUNK = 256 * 1024;
/** The static binary `npm run build` compiles next to this package's `dist/` (absent without a C compiler). */
export const BUNDLED_AGENT_BINARY = fileURLToPath(new URL('../dist/agent/cairn-agent', import.meta.url));

export interface ExecAgentOptions {
  /** The static agent binary on the host. */
  binary: string;
  /** Host directory holding one socket directory per sandbox, per worker. */
  socketRoot: string;
  /** How long a started sandbox's agent has to connect. Default 5 s. */
  connectTimeoutMs?: number;
}

/** The default root for agent sockets: `/run/cairn-agent` as root, else under the temp dir. */
export function defaultAgentSocketRoot(): string {
  const uid = process.getuid?.() ?? -1;
  return uid === 0 ? '/run/cairn-agent' : join(tmpdir(), `cairn-agent-${uid}`);
}

/** Agent options when the bundled binary was built, else null (steps then go over `docker exec`). */
export function bundledExecAgent(socketRoot: string = defaultAgentSocketRoot()): ExecAgentOptions | null {
  return existsSync(BUNDLED_AGENT_BINARY) ? { binary: BUNDLED_AGENT_BINARY, socketRoot } : null;
}

export interface AgentCommand {
  argv: readonly string[];
  env?: Readonly<Record<string, string>>;
  workdir?: string;
  stdin?: Uint8Array;
}

/** The binds that give a sandbox its agent; both read-only. */
export function agentBinds(binary: string, hostDir: string): string[] {
  return [`${binary}:${AGENT_PATH_IN_SANDBOX}:ro`, `${hostDir}:${AGENT_DIR_IN_SANDBOX}:ro`];
}

const refuseDir = (path: string, why: string): never => {
  throw new CairnError('E_SANDBOX_START', `the exec agent's socket directory ${path} ${why}`, { path });
};

/**
 * A directory of this process's own for agent sockets (the socket root, a worker's directory):
 * made 0700 when absent; one that exists must be a real directory (not a link), this process's
 * user's, mode 0700 — anything else is refused, never repaired. The parent of the root must not be
 * writable by others unless it is sticky (like /tmp), so nobody can swap the root under us.
 */
async function ownDirectory(path: string, isRoot: boolean): Promise<void> {
  const uid = process.getuid?.() ?? -1;
  if (isRoot) {
    const parent = await lstat(dirname(path)).catch(() => null);
    if (parent !== null && (!parent.isDirectory() || (parent.uid !== 0 && parent.uid !== uid) || ((parent.mode & 0o022) !== 0 && (parent.mode & 0o1000) === 0))) {
      refuseDir(path, 'has a parent others may change');
    }
  }
  await mkdir(path, { mode: 0o700, recursive: isRoot }).catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  });
  const seen = await lstat(path);
  if (seen.isSymbolicLink() || !seen.isDirectory()) refuseDir(path, 'is not a directory (a link?)');
  if (seen.uid !== uid) refuseDir(path, `is owned by uid ${seen.uid}, not this process's ${uid}`);
  if ((seen.mode & 0o7777) !== 0o700) refuseDir(path, `has mode ${(seen.mode & 0o7777).toString(8)}, not 700`);
}

/** One sandbox's listening socket, then its one connection. */
export class AgentEndpoint {
  private channel: AgentChannel | null = null;
  private readonly arrived: Promise<AgentChannel>;

  private constructor(
    readonly hostDir: string,
    private readonly server: Server,
    private readonly connectTimeoutMs: number,
    private readonly token: Buffer,
  ) {
    this.arrived = new Promise<AgentChannel>((resolve) => {
      server.on('connection', (socket: Socket) => {
        if (this.channel !== null) {
          socket.destroy(); // only the first caller is the agent
          return;
        }
        this.channel = new AgentChannel(socket, token);
        resolve(this.channel);
      });
    });
  }

  /**
   * Makes `hostDir` afresh — it must not exist yet, and its parents (the socket root and the
   * worker's directory) must be this process's own 0700 directories, not links — listens in it,
   * and hands it to the sandbox user (readable by that user only). A fresh random token is the
   * only thing the agent's connection is believed by (see `sendToken`).
   */
  static async open(hostDir: string, owner: { uid: number; gid: number }, connectTimeoutMs: number): Promise<AgentEndpoint> {
    const workerDir = dirname(hostDir);
    await ownDirectory(dirname(workerDir), true);
    await ownDirectory(workerDir, false);
    await mkdir(hostDir, { mode: 0o700 }).catch((error: unknown) => {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') refuseDir(hostDir, 'already exists (left by whom?); it is not reused');
      throw error;
    });
    // Checked and handed over through one descriptor of it, opened without following a link.
    const dir = await open(hostDir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    const server = createServer();
    // Heard from the first moment it listens: an early caller is the first caller.
    const endpoint = new AgentEndpoint(hostDir, server, connectTimeoutMs, randomBytes(TOKEN_BYTES));
    try {
      const seen = await dir.stat();
      const uid = process.getuid?.() ?? -1;
      if (!seen.isDirectory() || seen.uid !== uid || (seen.mode & 0o7777) !== 0o700) refuseDir(hostDir, 'is not the directory just made');
      const socketPath = join(hostDir, SOCKET_NAME);
      // Bound through the directory's descriptor: a socket's path may hold only 107 bytes, and a
      // long worker id (a test's, a pod's name) with a pool container's name runs past it.
      const bindPath = `/proc/self/fd/${dir.fd}/${SOCKET_NAME}`;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(bindPath, () => {
          server.off('error', reject);
          resolve();
        });
      });
      // The sandbox user must reach the socket; nobody else on the host needs to.
      await chmod(socketPath, 0o600);
      if (uid === 0) {
        // Nobody else can enter the directory yet: the socket is the one just made (and never followed).
        await lchown(socketPath, owner.uid, owner.gid);
        await dir.chown(owner.uid, owner.gid);
      } else {
        // Without root nothing can be handed over: the agent (another uid) must still reach it.
        await chmod(socketPath, 0o666);
        await dir.chmod(0o755);
      }
    } catch (error) {
      server.close();
      // The directory is the one just made, in a parent of this process's own: it goes, so a retry is not refused.
      await rm(hostDir, { recursive: true, force: true }).catch(() => undefined);
      throw error;
    } finally {
      await dir.close();
    }
    return endpoint;
  }

  /**
   * Delivers the token to the agent: attaches to the container's stdin before it starts (the
   * container is made with `withExecAgent`, stdin open once) and, once `send` is called after the
   * start, writes the token and closes it. Nothing else can read that stream (it is the engine's
   * pipe to the agent), so no process on the host or in the sandbox can have read the token before
   * the agent presented it; after that it is worth nothing (one connection is ever taken).
   */
  async sendToken(container: Docker.Container): Promise<{ send: () => void; cancel: () => void }> {
    const stream = (await container.attach({ stream: true, stdin: true, stdout: false, stderr: false, hijack: true })) as unknown as Duplex;
    stream.on('error', () => undefined);
    return {
      send: () => {
        stream.end(`${this.token.toString('hex')}\n`);
      },
      cancel: () => stream.destroy(),
    };
  }

  /** The agent's connection once it said hello and proved itself; `E_SANDBOX_START` when it does not in time. */
  async connected(): Promise<AgentChannel> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new CairnError('E_SANDBOX_START', `the sandbox's exec agent did not connect within ${this.connectTimeoutMs} ms`)),
        this.connectTimeoutMs,
      );
    });
    try {
      const channel = await Promise.race([this.arrived, timeout]);
      await Promise.race([channel.hello, timeout]).catch((error: unknown) => {
        if (error instanceof CairnError) throw error;
        throw new CairnError('E_SANDBOX_START', `the sandbox's exec agent was not accepted: ${error instanceof Error ? error.message : String(error)}`);
      });
      return channel;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Closes the connection and the listener and removes the directory. */
  async close(): Promise<void> {
    this.channel?.close();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await rm(this.hostDir, { recursive: true, force: true });
  }
}

type Waiter = { sink: OutputSink; resolve: (exitCode: number | null) => void };

/** Frames over the agent's connection; one command at a time. */
export class AgentChannel {
  readonly hello: Promise<void>;
  private readonly header = Buffer.alloc(5);
  private headerFill = 0;
  /** Payload bytes of the current frame still to come; `type` is null between frames. */
  private remaining = 0;
  private type: string | null = null;
  private control: Buffer[] = [];
  private waiter: Waiter | null = null;
  private closed = false;
  /** 'hello': waiting for the hello; 'token': for the token; 'ready': the agent is who it says. */
  private stage: 'hello' | 'token' | 'ready' = 'hello';
  private onHello: (() => void) | null = null;
  private onFail: ((error: Error) => void) | null = null;
  private failure = 'the exec agent connection closed';

  constructor(
    private readonly socket: Socket,
    private readonly token: Buffer,
  ) {
    this.hello = new Promise<void>((resolve, reject) => {
      this.onHello = resolve;
      this.onFail = reject;
    });
    // Not awaited by everyone: a sandbox removed before its hello is not an unhandled rejection.
    this.hello.catch(() => undefined);
    socket.on('data', (chunk: Buffer) => this.take(chunk));
    socket.on('close', () => this.end());
    socket.on('error', () => this.end());
  }

  get isOpen(): boolean {
    return !this.closed;
  }

  /**
   * Runs one command, handing its output to `sink` as it comes. Resolves with its exit code (128 +
   * signal when a signal ended it), or null when the connection ended first (the sandbox is gone).
   */
  run(command: AgentCommand, sink: OutputSink): Promise<number | null> {
    if (this.waiter !== null) throw new CairnError('E_CONFLICT', 'the exec agent is already running a command');
    if (this.closed) return Promise.resolve(null);
    const result = new Promise<number | null>((resolve) => {
      this.waiter = { sink, resolve };
    });
    const env = Object.entries(command.env ?? {}).map(([k, v]) => `${k}=${v}`);
    const strings = [command.workdir ?? '/work', String(command.argv.length), ...command.argv, String(env.length), ...env];
    const payload = Buffer.concat([Buffer.from([command.stdin === undefined ? 0 : 1]), ...strings.map((s) => Buffer.from(`${s}\u0000`, 'utf8'))]);
    this.send('X', payload);
    if (command.stdin !== undefined) {
      const stdin = Buffer.from(command.stdin.buffer, command.stdin.byteOffset, command.stdin.byteLength);
      for (let at = 0; at < stdin.length; at += STDIN_CHUNK) this.send('I', stdin.subarray(at, at + STDIN_CHUNK));
      this.send('i', Buffer.alloc(0));
    }
    return result;
  }

  /**
   * Kills the command in flight (its whole session, in the sandbox); its output is no longer read,
   * and `run` resolves with its exit code (137) as usual. A transfer past its bound ends this way
   * without ending the sandbox.
   */
  interrupt(): void {
    if (this.waiter !== null) this.send('K', Buffer.alloc(0));
  }

  /** Ends the connection; a command in flight resolves with null. */
  close(): void {
    this.socket.destroy();
    this.end();
  }

  private send(type: string, payload: Buffer): void {
    if (this.closed) return;
    const header = Buffer.alloc(5);
    header.write(type, 0, 'latin1');
    header.writeUInt32BE(payload.length, 1);
    this.socket.write(Buffer.concat([header, payload]));
  }

  /**
   * Frames are parsed as they stream in: output payloads go to the sink piece by piece, never
   * gathered (an endless stdout costs no memory here); the small control frames are gathered.
   */
  private take(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length && !this.closed) {
      if (this.remaining === 0 && this.type === null) {
        const take = Math.min(5 - this.headerFill, chunk.length - at);
        chunk.copy(this.header, this.headerFill, at, at + take);
        this.headerFill += take;
        at += take;
        if (this.headerFill < 5) return;
        this.headerFill = 0;
        this.type = String.fromCharCode(this.header[0]!);
        this.remaining = this.header.readUInt32BE(1);
        const streamed = this.type === 'O' || this.type === 'E';
        if (this.remaining > (streamed ? MAX_FRAME : 256)) return this.close();
        this.control = [];
        if (this.remaining === 0) this.finishFrame();
        continue;
      }
      const piece = chunk.subarray(at, at + Math.min(this.remaining, chunk.length - at));
      at += piece.length;
      this.remaining -= piece.length;
      if (this.type === 'O' || this.type === 'E') this.output(this.type, piece);
      else this.control.push(piece);
      if (this.remaining === 0) this.finishFrame();
    }
  }

  private finishFrame(): void {
    const type = this.type!;
    this.type = null;
    // Output frames were handed on as they came; an empty one carries nothing.
    if (type === 'O' || type === 'E') return;
    this.frame(type, Buffer.concat(this.control));
  }

  private output(type: 'O' | 'E', piece: Buffer): void {
    if (this.stage !== 'ready' || this.waiter === null) return this.close(); // output nobody asked for
    this.waiter.sink(type === 'O' ? 'stdout' : 'stderr', piece);
  }

  private frame(type: string, payload: Buffer): void {
    if (this.stage === 'hello') {
      // The first frame must be the hello; anything else is not our agent.
      if (type !== 'H' || payload.toString('latin1') !== HELLO) return this.refuse('the first frame was not the agent hello');
      this.stage = 'token';
      return;
    }
    if (this.stage === 'token') {
      // Then the token only the agent could have read (its stdin); compared in constant time.
      const expected = Buffer.from(this.token.toString('hex'), 'latin1');
      if (type !== 'A' || payload.length !== expected.length || !timingSafeEqual(payload, expected)) return this.refuse('the peer presented no token, or a wrong one');
      this.stage = 'ready';
      this.onHello?.();
      return;
    }
    const waiter = this.waiter;
    if (waiter === null) return this.close(); // output nobody asked for
    switch (type) {
      case 'P':
        return;
      case 'W': {
        const code = Number(payload.toString('latin1'));
        this.waiter = null;
        waiter.resolve(Number.isInteger(code) && code >= 0 && code <= 255 ? code : null);
        return;
      }
      default:
        return this.close();
    }
  }

  private refuse(why: string): void {
    this.failure = why;
    this.close();
  }

  private end(): void {
    if (this.closed) return;
    this.closed = true;
    this.onFail?.(new Error(this.failure));
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.resolve(null);
  }
}

/**
 * Removes socket directories under `workerRoot` whose sandbox `keep` does not hold (by container
 * name). `keep` is asked after the listing, so a sandbox being created meanwhile is asked about too.
 */
export async function sweepAgentDirs(workerRoot: string, keep: (name: string) => boolean): Promise<void> {
  let names: string[];
  try {
    names = await readdir(workerRoot);
  } catch {
    return;
  }
  await Promise.all(names.filter((name) => !keep(name)).map((name) => rm(join(workerRoot, name), { recursive: true, force: true })));
}

/**
 * A sandbox's container options with the agent as its main process instead of an idle `sleep`;
 * its stdin open once, for the token (`AgentEndpoint.sendToken`), and closed after it.
 */
export function withExecAgent(options: Docker.ContainerCreateOptions, binary: string, hostDir: string, lifetimeSeconds: number): Docker.ContainerCreateOptions {
  return {
    ...options,
    Entrypoint: [AGENT_PATH_IN_SANDBOX],
    Cmd: [AGENT_SOCKET_IN_SANDBOX, String(lifetimeSeconds)],
    OpenStdin: true,
    StdinOnce: true,
    AttachStdin: true,
    HostConfig: { ...options.HostConfig, Binds: agentBinds(binary, hostDir) },
  };
}

/** Whether a container has the agent's binary (every one made with `withExecAgent`). */
export function hasAgentBinary(info: Pick<Docker.ContainerInspectInfo, 'HostConfig'>): boolean {
  return (info.HostConfig.Binds ?? []).some((bind) => bind.split(':')[1] === AGENT_PATH_IN_SANDBOX);
}
