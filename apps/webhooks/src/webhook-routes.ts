import { createHash } from 'node:crypto';
import { EVENT_TYPES } from '@cairn/contracts';
import { filterMatches } from '@cairn/webhooks';

/*
 * Which receipts reach the webhooks service (ADR 0024): only the types some webhook's filter takes.
 * With no webhook, none — a stack without subscribers pays nothing for them. A durable consumer's
 * filter is fixed, so a change of the types in force moves to another durable, named for its
 * types, which begins early enough that no receipt recorded after a webhook's registration is
 * missed: where the consumer it replaces had got to, and for a type none took, at the first
 * registration that wants it (less a clock margin). What that replays again is queued once
 * (one first delivery per webhook and event), and a receipt older than a webhook never reaches it.
 */

/** The durables of the webhooks service: `cairn-webhooks-<digest of its types>` (and the one-durable `cairn-webhooks` of earlier releases). */
export const WEBHOOKS_DURABLE = 'cairn-webhooks';
/**
 * The type a parked consumer filters on: no receipt has it, so with no webhook the service still
 * pulls (and shows as up) while nothing is delivered to it.
 */
export const PARKED_TYPE = 'webhooks_parked';
/** How far before a webhook's registration (PostgreSQL's clock) its new types are read from (the log's clock). */
export const CLOCK_MARGIN_MS = 60_000;

export interface FilterGroup {
  events: readonly string[];
  firstCreatedAt: Date;
}

export interface ExistingDurable {
  name: string;
  /** The receipt types it takes; null when it takes every subject of the log. */
  types: ReadonlySet<string> | null;
  /** The first stream sequence it has not acknowledged. */
  nextSeq: number;
}

export interface RoutePlan {
  durable: string;
  types: ReadonlySet<string>;
  /**
   * Null: the durable is there, go on from its position. Else the new one begins at the earlier of
   * a stream sequence and the first receipt stored at or after a time; with neither, at what comes next.
   */
  create: null | { fromSeq: number | null; fromTime: Date | null };
  /** The webhooks service's other durables, removed once the new one is in place. */
  remove: string[];
}

/** The receipt types any of the filters take, sorted; the parked type when none. */
export function routedTypes(groups: readonly FilterGroup[]): string[] {
  const types = EVENT_TYPES.filter((type) => groups.some((group) => filterMatches(group.events, type)));
  return types.length === 0 ? [PARKED_TYPE] : [...types].sort();
}

export function durableFor(types: readonly string[]): string {
  return `${WEBHOOKS_DURABLE}-${types.length === 1 && types[0] === PARKED_TYPE ? 'parked' : createHash('sha256').update(types.join(' ')).digest('hex').slice(0, 12)}`;
}

export function isWebhooksDurable(name: string): boolean {
  return name === WEBHOOKS_DURABLE || name.startsWith(`${WEBHOOKS_DURABLE}-`);
}

/** Where the consumer for the filters in force is, or where a new one must begin. */
export function planRoute(groups: readonly FilterGroup[], existing: readonly ExistingDurable[]): RoutePlan {
  const types = routedTypes(groups);
  const durable = durableFor(types);
  const remove = existing.map((d) => d.name).filter((name) => name !== durable);
  if (existing.some((d) => d.name === durable)) return { durable, types: new Set(types), create: null, remove };
  let fromSeq: number | null = null;
  let fromTime: number | null = null;
  for (const type of types) {
    if (type === PARKED_TYPE) continue;
    const takers = existing.filter((d) => d.types === null || d.types.has(type));
    if (takers.length > 0) {
      fromSeq = Math.min(fromSeq ?? Infinity, ...takers.map((d) => d.nextSeq));
      continue;
    }
    const since = Math.min(...groups.filter((g) => filterMatches(g.events, type)).map((g) => g.firstCreatedAt.getTime())) - CLOCK_MARGIN_MS;
    fromTime = Math.min(fromTime ?? Infinity, since);
  }
  return { durable, types: new Set(types), create: { fromSeq, fromTime: fromTime === null ? null : new Date(fromTime) }, remove };
}
