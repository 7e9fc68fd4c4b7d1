import { PlacementQueue } from '@cairn/operational';
import type { QueueEntry } from '@cairn/operational';
import { queuePositions } from '@cairn/scheduling';
import { Injectable } from '@nestjs/common';
import type { QueueSpot } from '@cairn/contracts';

/**
 * Where runs and sandbox creates wait for room: the scheduler's placement queue (a KV bucket,
 * followed by one watch), as `queue` on a run's and a sandbox's view. Operational state, read as it
 * is now: a place in line moves as the line does.
 */
@Injectable()
export class QueueSpots {
  constructor(private readonly queue: PlacementQueue) {}

  /** Every queued chain's spot, by chain id. */
  async all(): Promise<Map<string, QueueSpot>> {
    const entries = await this.queue.list();
    const positions = queuePositions(entries.map((entry) => ({ ...entry.reservation, isolation: 'docker' as const, enqueuedAt: entry.enqueued_at })));
    const spots = new Map<string, QueueSpot>();
    for (const entry of entries) {
      const at = positions.get(entry.chain_id);
      if (at !== undefined) spots.set(entry.chain_id, spotOf(entry, at));
    }
    return spots;
  }

  /** `item` with its spot in the queue when it waits there (nothing added otherwise). */
  async with<T extends { queue?: QueueSpot }>(chainId: string, item: T): Promise<T> {
    const spot = (await this.all()).get(chainId);
    return spot === undefined ? item : { ...item, queue: spot };
  }

  /** Each item with its spot, one look at the queue for the whole page. */
  async withEach<T extends { queue?: QueueSpot }>(items: readonly T[], idOf: (item: T) => string): Promise<T[]> {
    const spots = await this.all();
    if (spots.size === 0) return [...items];
    return items.map((item) => {
      const spot = spots.get(idOf(item));
      return spot === undefined ? item : { ...item, queue: spot };
    });
  }
}

function spotOf(entry: QueueEntry, at: { position: number; length: number }): QueueSpot {
  return {
    position: at.position,
    length: at.length,
    waitingFor: entry.waiting_for,
    since: new Date(entry.enqueued_at).toISOString(),
    until: entry.deadline_at === null ? null : new Date(entry.deadline_at).toISOString(),
  };
}
