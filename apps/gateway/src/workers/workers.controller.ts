import { API_ROUTES } from '@cairn/contracts';
import type { Worker, WorkerList } from '@cairn/contracts';
import { LeaseStore, withLeasedReservations, WorkerRegistry } from '@cairn/operational';
import type { RegisteredWorker } from '@cairn/operational';
import { isExpired, workerStatus } from '@cairn/scheduling';
import { Controller } from '@nestjs/common';
import { ApiRoute } from '../http/api-route.decorator.js';

/**
 * A registered worker as the API shows it; `healthy` also needs a fresh heartbeat. `worker` is as
 * placement sees it: what its leases hold, with what it reports of those (`withLeasedReservations`).
 */
export function workerView(worker: RegisteredWorker, now: number): Worker {
  const status = workerStatus(worker, now);
  const reserved = { slots: worker.inFlight.length, memoryMiB: 0, cpus: 0, diskMiB: 0, pids: 0 };
  for (const held of worker.inFlight) {
    reserved.memoryMiB += held.memoryMiB;
    reserved.cpus += held.cpus;
    reserved.diskMiB += held.diskMiB;
    reserved.pids += held.pids ?? 0;
  }
  reserved.cpus = Math.round(reserved.cpus * 1000) / 1000;
  return {
    workerId: worker.workerId,
    healthy: status !== 'unhealthy' && status !== 'stale',
    draining: worker.draining,
    slots: worker.capacity.slots,
    inFlight: worker.inFlight.length,
    capacity: { ...worker.capacity },
    reserved,
    lastHeartbeatAt: new Date(worker.lastHeartbeatAt).toISOString(),
    images: { ...worker.images },
  };
}

/** `/v1/workers`: the operational registry (a KV bucket), read as it is now. */
@Controller()
export class WorkersController {
  constructor(
    private readonly registry: WorkerRegistry,
    private readonly leases: LeaseStore,
  ) {}

  @ApiRoute(API_ROUTES.listWorkers)
  async list(): Promise<WorkerList> {
    const now = Date.now();
    const [registered, leases] = await Promise.all([this.registry.list(), this.leases.list()]);
    const workers = withLeasedReservations(registered, leases.filter((lease) => !isExpired(lease, now)));
    return { items: workers.sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0)).map((worker) => workerView(worker, now)) };
  }
}
