import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { sameKey } from './request-checks.js';

interface Session {
  transport: StreamableHTTPServerTransport;
  server: Server;
  /** SHA-256 of the key that opened the session: every later request must bring the same key. */
  keyDigest: Buffer;
  lastUsed: number;
}

/**
 * The open Streamable HTTP sessions: one MCP server and transport each, bound to the key that
 * opened it. Bounded in number; a session idle past its limit is closed.
 */
export class McpSessions {
  private readonly sessions = new Map<string, Session>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly maxSessions: number,
    private readonly idleMs: number,
    private readonly onClosed: (sessionId: string, why: string) => void = () => undefined,
  ) {
    this.sweeper = setInterval(() => void this.sweep(), Math.min(60_000, Math.max(1_000, Math.floor(idleMs / 4))));
    this.sweeper.unref();
  }

  get size(): number {
    return this.sessions.size;
  }

  get full(): boolean {
    return this.sessions.size >= this.maxSessions;
  }

  add(sessionId: string, session: Omit<Session, 'lastUsed'>): void {
    this.sessions.set(sessionId, { ...session, lastUsed: Date.now() });
  }

  /** The session for this id and key; null when there is none, or it belongs to another key. */
  use(sessionId: string, keyDigest: Buffer): StreamableHTTPServerTransport | null {
    const session = this.sessions.get(sessionId);
    if (session === undefined || !sameKey(session.keyDigest, keyDigest)) return null;
    session.lastUsed = Date.now();
    return session.transport;
  }

  /** Forgets a session whose transport closed (DELETE, or closed here). */
  remove(sessionId: string, why: string): void {
    const session = this.sessions.get(sessionId);
    if (session === undefined) return;
    this.sessions.delete(sessionId);
    this.onClosed(sessionId, why);
    void session.server.close().catch(() => undefined);
  }

  private async sweep(): Promise<void> {
    const cutoff = Date.now() - this.idleMs;
    for (const [id, session] of [...this.sessions]) {
      if (session.lastUsed >= cutoff) continue;
      this.remove(id, 'idle');
      await session.transport.close().catch(() => undefined);
    }
  }

  async closeAll(): Promise<void> {
    clearInterval(this.sweeper);
    for (const [id, session] of [...this.sessions]) {
      this.remove(id, 'shutdown');
      await session.transport.close().catch(() => undefined);
    }
  }
}
