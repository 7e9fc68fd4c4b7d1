import type { KV, KvEntry, KvWatchEntry } from '@nats-io/kv';
import type { QueuedIterator } from '@nats-io/nats-core';

/*
 * A bucket's current entries, kept in memory by one watch, so that listing a bucket costs nothing.
 * Listing by reading every key costs a request per key ever written since the bucket's TTL — a
 * deleted key leaves a marker that is still listed — and the scheduler lists leases every second
 * and at every placement: with a day's TTL, that grew with every run of the last day.
 *
 * The mirror is a cache, never the authority: it serves lists only while its watch runs and after
 * it has caught up with the bucket; writes of the process that owns it are applied at once (by
 * revision, so a late delivery never undoes a newer write); entries older than the bucket's TTL
 * are left out, as the broker would have dropped them (NATS 2.9 sends no notice of that). A
 * caller that acts on an entry (the lease scan failing a run) reads the key itself first.
 */

interface Held<T> {
  revision: number;
  /** null: deleted. */
  value: T | null;
  writtenAt: number;
}

export class BucketMirror<T> {
  private readonly held = new Map<string, Held<T>>();
  private caughtUp = false;
  private ended = false;
  private watch: QueuedIterator<KvWatchEntry> | null = null;

  private constructor(
    private readonly ttlMs: number,
    private readonly decode: (entry: KvEntry) => T | null,
  ) {}

  /**
   * Starts following `kv`; resolves once the mirror holds the bucket as it was when the watch
   * started (or rejects, closed, when it cannot within `timeoutMs`).
   */
  static async follow<T>(kv: KV, decode: (entry: KvEntry) => T | null, timeoutMs = 5_000): Promise<BucketMirror<T>> {
    const status = await kv.status();
    // The bucket's own TTL (an existing bucket keeps the one it was made with); 0 is none.
    const mirror = new BucketMirror(status.ttl > 0 ? status.ttl : Number.POSITIVE_INFINITY, decode);
    const empty = status.values === 0;
    const watch = await kv.watch();
    mirror.watch = watch;
    let caughtUp: () => void = () => undefined;
    const ready = new Promise<void>((resolve) => (caughtUp = resolve));
    if (empty) {
      mirror.caughtUp = true;
      caughtUp();
    }
    void (async () => {
      try {
        for await (const entry of watch) {
          mirror.apply(entry.key, entry.revision, entry.operation === 'PUT' ? mirror.decode(entry) : null, entry.created.getTime());
          // The last of the values the watch started with: the mirror now holds the bucket.
          if (!mirror.caughtUp && entry.delta === 0) {
            mirror.caughtUp = true;
            caughtUp();
          }
        }
      } catch {
        // The watch failed: the mirror stops serving (below) and callers read the bucket.
      } finally {
        mirror.ended = true;
      }
    })();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    const outcome = await Promise.race([ready, timedOut]);
    clearTimeout(timer);
    if (outcome === 'timeout') {
      mirror.close();
      throw new Error(`the watch did not catch up with the bucket within ${timeoutMs} ms`);
    }
    return mirror;
  }

  /** Whether lists can be served: caught up and still watching. */
  get live(): boolean {
    return this.caughtUp && !this.ended;
  }

  /** Takes note of a write (a delivery, or the owner's own acknowledged write): newer revisions win. */
  apply(key: string, revision: number, value: T | null, writtenAt: number = Date.now()): void {
    const current = this.held.get(key);
    if (current !== undefined && current.revision >= revision) return;
    this.held.set(key, { revision, value, writtenAt });
  }

  /** The owner deleted `key` (its marker's revision is not returned: the delivery brings it). */
  deleted(key: string): void {
    const current = this.held.get(key);
    this.held.set(key, { revision: current?.revision ?? 0, value: null, writtenAt: Date.now() });
  }

  /**
   * The value of `key` with its revision, when the mirror serves and holds it live; else null. A
   * hint for a compare-and-set write, which refuses it if the key moved since.
   */
  entry(key: string, now: number = Date.now()): { revision: number; value: T } | null {
    const held = this.live ? this.held.get(key) : undefined;
    if (held === undefined || held.value === null || held.writtenAt + this.ttlMs <= now) return null;
    return { revision: held.revision, value: held.value };
  }

  /** The live values by key order, or null when the mirror cannot serve (read the bucket instead). */
  values(now: number = Date.now()): T[] | null {
    return this.entries(now)?.map((entry) => entry.value) ?? null;
  }

  /** The live entries (key, revision, value) by key order, or null when the mirror cannot serve. */
  entries(now: number = Date.now()): { key: string; revision: number; value: T }[] | null {
    if (!this.live) return null;
    const out: { key: string; revision: number; value: T }[] = [];
    for (const [key, held] of this.held) {
      if (held.value === null) {
        // A deleted key is forgotten once its marker would have aged out too.
        if (held.writtenAt + this.ttlMs <= now) this.held.delete(key);
        continue;
      }
      if (held.writtenAt + this.ttlMs > now) out.push({ key, revision: held.revision, value: held.value });
    }
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  close(): void {
    this.ended = true;
    this.watch?.stop();
  }
}

/** Retry a mirror that could not start or stopped no sooner than this; lists read the bucket meanwhile. */
const FOLLOW_RETRY_MS = 5_000;

/**
 * A store's mirror, started on the first list and started again (not more often than every few
 * seconds) when its watch ends; until it serves, `values` is null and the store reads the bucket.
 */
export class LazyBucketMirror<T> {
  private mirror: BucketMirror<T> | null = null;
  private starting = false;
  private lastAttempt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly kv: KV,
    private readonly decode: (entry: KvEntry) => T | null,
  ) {}

  values(now: number = Date.now()): T[] | null {
    const served = this.mirror?.values(now) ?? null;
    if (served === null) this.start();
    return served;
  }

  entries(now: number = Date.now()): { key: string; revision: number; value: T }[] | null {
    const served = this.mirror?.entries(now) ?? null;
    if (served === null) this.start();
    return served;
  }

  entry(key: string, now: number = Date.now()): { revision: number; value: T } | null {
    return this.mirror?.entry(key, now) ?? null;
  }

  apply(key: string, revision: number, value: T | null): void {
    this.mirror?.apply(key, revision, value);
  }

  deleted(key: string): void {
    this.mirror?.deleted(key);
  }

  close(): void {
    this.mirror?.close();
    this.mirror = null;
    this.lastAttempt = Number.POSITIVE_INFINITY;
  }

  private start(): void {
    const now = Date.now();
    if (this.starting || now - this.lastAttempt < FOLLOW_RETRY_MS) return;
    this.starting = true;
    this.lastAttempt = now;
    this.mirror?.close();
    this.mirror = null;
    BucketMirror.follow(this.kv, this.decode)
      .then((mirror) => {
        if (this.lastAttempt === Number.POSITIVE_INFINITY) mirror.close();
        else this.mirror = mirror;
      })
      .catch(() => undefined)
      .finally(() => (this.starting = false));
  }
}
