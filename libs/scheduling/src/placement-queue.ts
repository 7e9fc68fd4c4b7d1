import type { CapacityResource } from '@cairn/contracts';
import { admitRun, placement } from './worker-registry.js';
import type { PlaceOptions, PlacementRequest, WorkerRecord } from './worker-registry.js';

/*
 * The placement queue's decisions (pure): work that found no worker with room waits in arrival
 * order, and each time room may have freed the queue is planned again over one snapshot of the
 * workers. First come, first placed — but one that does not fit does not hold back a smaller one
 * behind it that does (backfill), and a newcomer is placed at once only when everything queued
 * before it that fits has been given its room first.
 */

/** What a queued request waits for: a dimension of room, or a runtime to run on at all. */
export type WaitingFor = CapacityResource | 'runtime';

export interface QueuedRequest extends PlacementRequest {
  /** When it started waiting (epoch ms): the queue's order, then the chain id. */
  enqueuedAt: number;
}

export interface QueuePlan<R extends QueuedRequest> {
  /** To place now, in queue order, each on its worker (the snapshot admitted them one after another). */
  placed: { request: R; worker: WorkerRecord }[];
  /** Still waiting, in queue order, with what each lacks. */
  waiting: { request: R; waitingFor: WaitingFor }[];
  /** Larger than every live worker even when it is empty: waiting would never end. */
  never: { request: R; resource: CapacityResource }[];
}

export interface PlanOptions<R extends QueuedRequest> extends PlaceOptions {
  /** The workers a request may go to (say, those with its image); default all. */
  candidates?: (request: R, workers: readonly WorkerRecord[]) => readonly WorkerRecord[];
}

/** Queue order: who waited longest first; the chain id breaks ties, so every process agrees. */
export function queueOrder(a: QueuedRequest, b: QueuedRequest): number {
  if (a.enqueuedAt !== b.enqueuedAt) return a.enqueuedAt - b.enqueuedAt;
  return a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0;
}

/**
 * Plans the queue (`requests` in any order) over `workers` as they are now: in queue order, each
 * request goes to the best worker with room, whose snapshot then holds it, so the next one sees
 * what is left.
 */
export function planQueue<R extends QueuedRequest>(workers: readonly WorkerRecord[], requests: readonly R[], now: number, options: PlanOptions<R> = {}): QueuePlan<R> {
  let current = [...workers];
  const plan: QueuePlan<R> = { placed: [], waiting: [], never: [] };
  for (const request of [...requests].sort(queueOrder)) {
    const candidates = options.candidates?.(request, current) ?? current;
    const where = placement(candidates, request, now, options);
    switch (where.kind) {
      case 'placed': {
        const admitted = admitRun(where.worker, request, now, options);
        if (!admitted.ok) {
          plan.waiting.push({ request, waitingFor: 'slots' });
          break;
        }
        current = current.map((worker) => (worker.workerId === where.worker.workerId ? admitted.worker : worker));
        plan.placed.push({ request, worker: admitted.worker });
        break;
      }
      case 'wait':
        plan.waiting.push({ request, waitingFor: where.waitingFor });
        break;
      case 'never':
        plan.never.push({ request, resource: where.resource });
        break;
    }
  }
  return plan;
}

/** Each queued request's place in line (1-based) and the queue's length, in queue order. */
export function queuePositions<R extends QueuedRequest>(requests: readonly R[]): Map<string, { position: number; length: number }> {
  const sorted = [...requests].sort(queueOrder);
  return new Map(sorted.map((request, i) => [request.runId, { position: i + 1, length: sorted.length }]));
}
