import { API_ROUTES, CairnError, WorkerIdSchema } from '@cairn/contracts';
import type { Worker, WorkerList } from '@cairn/contracts';
import { LeaseStore, withDrains, withLeasedReservations, WorkerDrains, WorkerRegistry } from '@cairn/operational';
import type { RegisteredWorker, WorkerDrain } from '@cairn/operational';
import { isExpired, isSessionId, workerStatus } from '@cairn/scheduling';
import { Controller, Inject, Param } from '@nestjs/common';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG } from '../gateway.tokens.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { isOperator, OPERATOR_TENANT } from '../keys/key-admin.service.js';

const WORKER_ID = { schema: WorkerIdSchema };

/**
 * A registered worker as the API shows it; `healthy` also needs a fresh heartbeat. `worker` is as
 * placement sees it: what its leases hold, with what it reports of those (`withLeasedReservations`),
 * and draining when an operator drained it (`withDrains`).
 */
export function workerView(worker: RegisteredWorker, now: number, drain: WorkerDrain | null = null, staleAfterMs?: number): Worker {
  const status = workerStatus(worker, now, staleAfterMs);
  const reserved = { slots: worker.inFlight.length, memoryMiB: 0, cpus: 0, diskMiB: 0, pids: 0 };
  for (const held of worker.inFlight) {
    reserved.memoryMiB += held.memoryMiB;
    reserved.cpus += held.cpus;
    reserved.diskMiB += held.diskMiB;
    reserved.pids += held.pids ?? 0;
  }
  reserved.cpus = Math.round(reserved.cpus * 1000) / 1000;
  const sandboxes = worker.inFlight.filter((held) => isSessionId(held.runId)).length;
  return {
    workerId: worker.workerId,
    status,
    healthy: status !== 'unhealthy' && status !== 'stale',
    draining: worker.draining,
    drain: drain === null ? null : { since: new Date(drain.drainedAt).toISOString(), by: drain.by },
    slots: worker.capacity.slots,
    inFlight: worker.inFlight.length,
    runs: worker.inFlight.length - sandboxes,
    sandboxes,
    capacity: { ...worker.capacity },
    reserved,
    lastHeartbeatAt: new Date(worker.lastHeartbeatAt).toISOString(),
    images: { ...worker.images },
  };
}

/** A worker's drain is the operator's: the workers serve every tenant. */
function operatorOnly(principal: Principal): void {
  if (!isOperator(principal)) throw new CairnError('E_FORBIDDEN', `workers are the operator's: an admin key of tenant ${OPERATOR_TENANT} drains them`);
}

/** `/v1/workers`: the operational registry (a KV bucket) and operators' drains, read as they are now. */
@Controller()
export class WorkersController {
  constructor(
    private readonly registry: WorkerRegistry,
    private readonly drains: WorkerDrains,
    private readonly leases: LeaseStore,
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
  ) {}

  @ApiRoute(API_ROUTES.listWorkers)
  async list(): Promise<WorkerList> {
    const now = Date.now();
    const [registered, drains, leases] = await Promise.all([this.registry.list(), this.drains.list(), this.leases.list()]);
    const workers = withDrains(withLeasedReservations(registered, leases.filter((lease) => !isExpired(lease, now))), drains);
    return {
      items: workers.sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0)).map((worker) => workerView(worker, now, drains.get(worker.workerId) ?? null, this.config.CAIRN_WORKER_STALE_AFTER_MS)),
    };
  }

  /** Marks the worker drained (the scheduler places nothing more on it); its work in flight carries on. */
  @ApiRoute(API_ROUTES.drainWorker)
  async drain(@CurrentPrincipal() principal: Principal, @Param('id', WORKER_ID) id: string): Promise<Worker> {
    operatorOnly(principal);
    if ((await this.registry.get(id)) === null) throw new CairnError('E_NOT_FOUND', `no worker ${id} is registered`, { workerId: id });
    const drain = await this.drains.drain({ workerId: id, drainedAt: Date.now(), by: `key:${principal.keyId}` });
    return this.viewOf(id, drain);
  }

  /** Lifts the operator's drain: the worker takes work again at the scheduler's next pass. */
  @ApiRoute(API_ROUTES.undrainWorker)
  async undrain(@CurrentPrincipal() principal: Principal, @Param('id', WORKER_ID) id: string): Promise<Worker> {
    operatorOnly(principal);
    // As a drain: a worker that is not registered now is unknown here (its drain, if any, stays until it is back).
    if ((await this.registry.get(id)) === null) throw new CairnError('E_NOT_FOUND', `no worker ${id} is registered`, { workerId: id });
    await this.drains.undrain(id);
    return this.viewOf(id, null);
  }

  private async viewOf(id: string, drain: WorkerDrain | null): Promise<Worker> {
    const now = Date.now();
    const [registered, leases] = await Promise.all([this.registry.get(id), this.leases.list()]);
    if (registered === null) throw new CairnError('E_NOT_FOUND', `no worker ${id} is registered`, { workerId: id });
    const [worker] = withDrains(withLeasedReservations([registered], leases.filter((lease) => !isExpired(lease, now))), drain === null ? new Map() : new Map([[id, drain]]));
    return workerView(worker!, now, drain, this.config.CAIRN_WORKER_STALE_AFTER_MS);
  }
}
