import { API_ROUTES } from '@cairn/contracts';
import type { Worker, WorkerList } from '@cairn/contracts';
import { WorkerRegistry } from '@cairn/operational';
import type { RegisteredWorker } from '@cairn/operational';
import { workerStatus } from '@cairn/scheduling';
import { Controller } from '@nestjs/common';
import { ApiRoute } from '../http/api-route.decorator.js';

/** A registered worker as the API shows it; `healthy` also needs a fresh heartbeat. */
export function workerView(worker: RegisteredWorker, now: number): Worker {
  const status = workerStatus(worker, now);
  return {
    workerId: worker.workerId,
    healthy: status !== 'unhealthy' && status !== 'stale',
    draining: worker.draining,
    slots: worker.capacity.slots,
    inFlight: worker.inFlight.length,
    capacity: { ...worker.capacity },
    lastHeartbeatAt: new Date(worker.lastHeartbeatAt).toISOString(),
    images: { ...worker.images },
  };
}

/** `/v1/workers`: the operational registry (a KV bucket), read as it is now. */
@Controller()
export class WorkersController {
  constructor(private readonly registry: WorkerRegistry) {}

  @ApiRoute(API_ROUTES.listWorkers)
  async list(): Promise<WorkerList> {
    const now = Date.now();
    const workers = await this.registry.list();
    return { items: workers.sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0)).map((worker) => workerView(worker, now)) };
  }
}
