import type { SandboxCaps } from '@cairn/sandbox';
import { createHash } from 'node:crypto';

/*
 * A warm pool's bookkeeping (operational state, never evidence): which profiles this driver ran
 * last (LRU, bounded), the started, unused sandboxes kept for each, and what to warm next. Pure:
 * the driver creates and destroys the containers.
 */

export interface WarmPoolLimits {
  /** Sandboxes kept per profile; 0 turns the pool off. */
  perProfile: number;
  /** Sandboxes kept (and being warmed) across every profile. */
  total: number;
  /** Distinct profiles remembered (the last ones run). */
  profiles: number;
}

/** Everything a sandbox's container is made from besides its name and labels. */
export interface WarmProfile {
  workerId: string;
  imageId: string;
  caps: SandboxCaps;
}

/** What warming one more sandbox of a profile needs. */
export interface WarmRecipe extends WarmProfile {
  poolId: string;
  lifetimeSeconds: number;
}

export interface WarmEntry<T> {
  item: T;
  /** When its PID 1's sleep runs out (epoch ms): a run needing longer does not get it. */
  expiresAt: number;
}

/**
 * A profile's id, and its `io.cairn.pool` label: the engine's image id, the caps, the network (always
 * none) and the worker — exactly what the container is made of, so a claim gets what a create would.
 */
export function warmProfileId(profile: WarmProfile): string {
  const { caps } = profile;
  const key = JSON.stringify([profile.workerId, profile.imageId, caps.wallSeconds, caps.memoryMiB, caps.pids, caps.diskMiB, caps.cpus, 'none']);
  return createHash('sha256').update(key).digest('hex').slice(0, 24);
}

export class WarmPoolBook<T> {
  /** Most recently run first. */
  private readonly recent: WarmRecipe[] = [];
  private readonly idle = new Map<string, WarmEntry<T>[]>();
  private warming = 0;

  constructor(private readonly limits: WarmPoolLimits) {}

  get enabled(): boolean {
    return this.limits.perProfile > 0 && this.limits.total > 0 && this.limits.profiles > 0;
  }

  /** Sandboxes kept idle now. */
  get size(): number {
    let size = 0;
    for (const entries of this.idle.values()) size += entries.length;
    return size;
  }

  /** A run of `recipe`'s profile: it becomes the most recent; returns what the profile falling out of the LRU kept. */
  touch(recipe: WarmRecipe): T[] {
    if (!this.enabled) return [];
    const at = this.recent.findIndex((r) => r.poolId === recipe.poolId);
    if (at >= 0) this.recent.splice(at, 1);
    this.recent.unshift(recipe);
    const evicted: T[] = [];
    for (const dropped of this.recent.splice(this.limits.profiles)) {
      evicted.push(...(this.idle.get(dropped.poolId) ?? []).map((e) => e.item));
      this.idle.delete(dropped.poolId);
    }
    return evicted;
  }

  /**
   * An idle sandbox of the profile whose lifetime still covers `lifetimeSeconds` from `now` (oldest
   * first), and those that no longer cover one — for the caller to destroy.
   */
  take(poolId: string, lifetimeSeconds: number, now: number): { entry: T | null; expired: T[] } {
    const entries = this.idle.get(poolId) ?? [];
    const expired: T[] = [];
    let entry: T | null = null;
    while (entries.length > 0 && entry === null) {
      const next = entries.shift();
      if (next === undefined) break;
      if (next.expiresAt - now >= lifetimeSeconds * 1000) entry = next.item;
      else expired.push(next.item);
    }
    return { entry, expired };
  }

  /** The profile to warm next (the most recent one short of its share), counted as warming; null when full. */
  nextToWarm(): WarmRecipe | null {
    if (!this.enabled || this.size + this.warming >= this.limits.total) return null;
    const recipe = this.recent.find((r) => (this.idle.get(r.poolId)?.length ?? 0) < this.limits.perProfile) ?? null;
    if (recipe !== null) this.warming++;
    return recipe;
  }

  /** A warmed sandbox (or a failed warming: `entry` null) is back; false when its profile is no longer wanted. */
  warmed(poolId: string, entry: WarmEntry<T> | null): boolean {
    this.warming = Math.max(0, this.warming - 1);
    if (entry === null) return false;
    const wanted = this.recent.some((r) => r.poolId === poolId);
    const entries = this.idle.get(poolId) ?? [];
    if (!wanted || entries.length >= this.limits.perProfile || this.size >= this.limits.total) return false;
    entries.push(entry);
    this.idle.set(poolId, entries);
    return true;
  }

  /** The caps of every idle sandbox, one entry each: what the pool holds of its worker's capacity. */
  holding(): SandboxCaps[] {
    const caps: SandboxCaps[] = [];
    for (const [poolId, entries] of this.idle) {
      const recipe = this.recent.find((r) => r.poolId === poolId);
      if (recipe !== undefined) for (let i = 0; i < entries.length; i++) caps.push(recipe.caps);
    }
    return caps;
  }

  /** Takes one idle sandbox out (of the least recently run profile that has one), for the caller to destroy; null when none. */
  evictOne(): T | null {
    for (let i = this.recent.length - 1; i >= 0; i--) {
      const recipe = this.recent[i];
      const entries = recipe === undefined ? undefined : this.idle.get(recipe.poolId);
      const entry = entries?.pop();
      if (entry !== undefined) return entry.item;
    }
    return null;
  }

  holds(predicate: (item: T) => boolean): boolean {
    for (const entries of this.idle.values()) if (entries.some((e) => predicate(e.item))) return true;
    return false;
  }

  /** Forgets every profile; returns every idle sandbox, for the caller to destroy. */
  drain(): T[] {
    const items = [...this.idle.values()].flat().map((e) => e.item);
    this.idle.clear();
    this.recent.length = 0;
    return items;
  }
}
