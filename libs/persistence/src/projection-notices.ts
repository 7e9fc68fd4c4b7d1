import pg from 'pg';
import { boundedPgSettings } from './pg-bounds.js';

/**
 * The PostgreSQL channel the projector notifies when a batch commits (NOTIFY is delivered on
 * commit, so a listener that reads after a notice reads what it announced). Per database, so
 * stacks on different databases never hear each other.
 */
export const PROJECTION_NOTICE_CHANNEL = 'cairn_projected';
/** NOTIFY payloads must stay under 8000 bytes. */
const MAX_PAYLOAD_CHARS = 7000;
const RECONNECT_MS = 1000;

/** `<chain id>:<seq>` for each chain a batch moved (its highest seq), in payloads small enough for NOTIFY. */
export function projectionNoticePayloads(heads: ReadonlyMap<string, number>): string[] {
  const payloads: string[] = [];
  let current = '';
  for (const [chainId, seq] of heads) {
    const entry = `${chainId}:${seq}`;
    if (current !== '' && current.length + 1 + entry.length > MAX_PAYLOAD_CHARS) {
      payloads.push(current);
      current = '';
    }
    current = current === '' ? entry : `${current},${entry}`;
  }
  if (current !== '') payloads.push(current);
  return payloads;
}

/** The (chain id, seq) pairs of a payload; what does not parse is left out (a notice is only a wake-up). */
export function parseProjectionNotice(payload: string): [string, number][] {
  const pairs: [string, number][] = [];
  for (const entry of payload.split(',')) {
    const at = entry.lastIndexOf(':');
    const seq = Number(entry.slice(at + 1));
    if (at > 0 && Number.isSafeInteger(seq) && seq > 0) pairs.push([entry.slice(0, at), seq]);
  }
  return pairs;
}

/** A wait for a chain's projection to reach a seq: resolves true on the notice, false at its timeout. */
export interface ProjectionWait {
  readonly reached: Promise<boolean>;
  cancel(): void;
}

/**
 * Listens for the projector's notices on its own connection (`LISTEN`), so readers wait for the
 * projection to move instead of polling it. Only a wake-up: the projection stays the one source of
 * what is read. While the connection is down (it reconnects every second) `live` is false and a
 * wait simply times out, so callers keep a slower poll as their backstop.
 */
export class ProjectionNotices {
  private client: pg.Client | null = null;
  private closed = false;
  private reconnect: NodeJS.Timeout | null = null;
  private readonly waiters = new Map<string, Set<(seq: number) => void>>();

  private constructor(private readonly connectionString: string) {}

  /** Starts listening; resolves once the first LISTEN is in place or has failed (then it retries). */
  static async open(connectionString: string): Promise<ProjectionNotices> {
    const notices = new ProjectionNotices(connectionString);
    await notices.connect();
    return notices;
  }

  get live(): boolean {
    return this.client !== null;
  }

  /**
   * Resolves true once a notice says `chainId` is projected at `seq` or beyond, false after
   * `timeoutMs`. Register before reading, so a notice that lands during the read is not missed.
   */
  after(chainId: string, seq: number, timeoutMs: number): ProjectionWait {
    let settle: (reached: boolean) => void = () => undefined;
    const reached = new Promise<boolean>((resolve) => (settle = resolve));
    const listener = (projected: number) => {
      if (projected >= seq) done(true);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    const done = (value: boolean) => {
      clearTimeout(timer);
      const set = this.waiters.get(chainId);
      set?.delete(listener);
      if (set?.size === 0) this.waiters.delete(chainId);
      settle(value);
    };
    let set = this.waiters.get(chainId);
    if (set === undefined) this.waiters.set(chainId, (set = new Set()));
    set.add(listener);
    return { reached, cancel: () => done(false) };
  }

  /** Calls `listener` with each seq the projection reaches on `chainId` until the returned function is called. */
  subscribe(chainId: string, listener: (seq: number) => void): () => void {
    let set = this.waiters.get(chainId);
    if (set === undefined) this.waiters.set(chainId, (set = new Set()));
    set.add(listener);
    return () => {
      const current = this.waiters.get(chainId);
      current?.delete(listener);
      if (current?.size === 0) this.waiters.delete(chainId);
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.reconnect !== null) clearTimeout(this.reconnect);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.connectionString, application_name: 'cairn-projection-notices', ...boundedPgSettings() });
    const lost = () => {
      if (this.client === client) this.client = null;
      void client.end().catch(() => undefined);
      if (!this.closed && this.reconnect === null) {
        this.reconnect = setTimeout(() => {
          this.reconnect = null;
          void this.connect();
        }, RECONNECT_MS);
        this.reconnect.unref();
      }
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (message) => {
      if (message.channel !== PROJECTION_NOTICE_CHANNEL || message.payload === undefined) return;
      for (const [chainId, seq] of parseProjectionNotice(message.payload)) {
        for (const listener of [...(this.waiters.get(chainId) ?? [])]) listener(seq);
      }
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${PROJECTION_NOTICE_CHANNEL}`);
      if (this.closed) {
        await client.end();
        return;
      }
      this.client = client;
    } catch {
      lost();
    }
  }
}
