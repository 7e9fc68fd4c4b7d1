import { CairnError } from '@cairn/contracts';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, readdir, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type Docker from 'dockerode';
import type { OutputSink } from './exec-output.js';

/*
 * The host side of the in-sandbox exec agent (agent/cairn-agent.c, docs/adr/0005-exec-agent.md).
 * A sandbox's main process is the agent; before the container starts, the host listens on a unix
 * socket in a directory of its own for that sandbox, bind-mounted read-only into it. The agent
 * connects once, before any untrusted code runs, and every step then goes over that connection
 * instead of a `docker exec` (≈ 45 ms each here). A second connection is refused: whatever the
 * sandbox starts later cannot stand in for the agent.
 */

/** Where the agent and its socket appear inside the sandbox. */
export const AGENT_PATH_IN_SANDBOX = '/.cairn/agent';
export const AGENT_DIR_IN_SANDBOX = '/.cairn/run';
const SOCKET_NAME = 'a.sock';
export const AGENT_SOCKET_IN_SANDBOX = `${AGENT_DIR_IN_SANDBOX}/${SOCKET_NAME}`;

const HELLO = 'cairn-agent/1';
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

/** One sandbox's listening socket, then its one connection. */
export class AgentEndpoint {
  private channel: AgentChannel | null = null;
  private readonly arrived: Promise<AgentChannel>;

  private constructor(
    readonly hostDir: string,
    private readonly server: Server,
    private readonly connectTimeoutMs: number,
  ) {
    this.arrived = new Promise<AgentChannel>((resolve) => {
      server.on('connection', (socket: Socket) => {
        if (this.channel !== null) {
          socket.destroy(); // only the first caller is the agent
          return;
        }
        this.channel = new AgentChannel(socket);
        resolve(this.channel);
      });
    });
  }

  /** Makes `hostDir` (readable by the sandbox user only) and listens in it. */
  static async open(hostDir: string, owner: { uid: number; gid: number }, connectTimeoutMs: number): Promise<AgentEndpoint> {
    await rm(hostDir, { recursive: true, force: true });
    await mkdir(hostDir, { recursive: true, mode: 0o700 });
    const server = createServer();
    const socketPath = join(hostDir, SOCKET_NAME);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // The sandbox user must reach the socket; nobody else on the host needs to.
    await chmod(socketPath, 0o600);
    if (process.getuid?.() === 0) {
      await chown(socketPath, owner.uid, owner.gid);
      await chown(hostDir, owner.uid, owner.gid);
    } else {
      await chmod(socketPath, 0o666);
      await chmod(hostDir, 0o755);
    }
    return new AgentEndpoint(hostDir, server, connectTimeoutMs);
  }

  /** The agent's connection once it said hello; `E_SANDBOX_START` when it does not in time. */
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
      await Promise.race([channel.hello, timeout]);
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
  private greeted = false;
  private onHello: (() => void) | null = null;
  private onFail: ((error: Error) => void) | null = null;

  constructor(private readonly socket: Socket) {
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
    if (!this.greeted || this.waiter === null) return this.close(); // output nobody asked for
    this.waiter.sink(type === 'O' ? 'stdout' : 'stderr', piece);
  }

  private frame(type: string, payload: Buffer): void {
    if (!this.greeted) {
      // The first frame must be the hello; anything else is not our agent.
      if (type !== 'H' || payload.toString('latin1') !== HELLO) return this.close();
      this.greeted = true;
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

  private end(): void {
    if (this.closed) return;
    this.closed = true;
    this.onFail?.(new Error('the exec agent connection closed'));
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

/** A sandbox's container options with the agent as its main process instead of an idle `sleep`. */
export function withExecAgent(options: Docker.ContainerCreateOptions, binary: string, hostDir: string, lifetimeSeconds: number): Docker.ContainerCreateOptions {
  return {
    ...options,
    Entrypoint: [AGENT_PATH_IN_SANDBOX],
    Cmd: [AGENT_SOCKET_IN_SANDBOX, String(lifetimeSeconds)],
    HostConfig: { ...options.HostConfig, Binds: agentBinds(binary, hostDir) },
  };
}
