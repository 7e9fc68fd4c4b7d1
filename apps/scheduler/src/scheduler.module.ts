import { approvalsBucketFor, drainsBucketFor, queueBucketFor } from '@cairn/config';
import { LeaseStore, PlacementQueue, WorkerDrains, WorkerRegistry } from '@cairn/operational';
import { NATS_CONNECTION, ServiceRuntimeModule } from '@cairn/service-kit';
import type { NatsConnection } from '@nats-io/transport-node';
import type { DynamicModule } from '@nestjs/common';
import { ApprovalDeadlines } from './approval-deadlines.store.js';
import { ApprovalExpiryScanner } from './approval-expiry.scanner.js';
import { LeaseExpiryScanner } from './lease-expiry.scanner.js';
import type { SchedulerConfig } from './scheduler.config.js';
import { PLACEMENT_GATE, Placements } from './placements.service.js';
import { SchedulingHandler } from './scheduling.handler.js';
import { SerialGate } from './serial-gate.js';

export const SCHEDULER_SERVICE = 'scheduler';

/**
 * The scheduler: a reactor that places runs (and keeps the index of approval deadlines), the
 * placement queue of what waits for room, a timer
 * that fails the runs of lost workers, and one that rejects approvals nobody decided in time.
 */
export function schedulerModule(config: SchedulerConfig): DynamicModule {
  return ServiceRuntimeModule.forRoot({
    service: SCHEDULER_SERVICE,
    config,
    handler: SchedulingHandler,
    ackWaitMs: config.CAIRN_SCHEDULER_ACK_WAIT_MS,
    providers: [
      { provide: PLACEMENT_GATE, useValue: new SerialGate() },
      {
        provide: WorkerRegistry,
        inject: [NATS_CONNECTION],
        useFactory: (nc: NatsConnection) => WorkerRegistry.open(nc, { bucket: config.CAIRN_WORKERS_BUCKET, replicas: config.CAIRN_NATS_REPLICAS, observe: true }),
      },
      {
        provide: WorkerDrains,
        inject: [NATS_CONNECTION],
        useFactory: (nc: NatsConnection) => WorkerDrains.open(nc, { bucket: drainsBucketFor(config.CAIRN_WORKERS_BUCKET), replicas: config.CAIRN_NATS_REPLICAS }),
      },
      {
        provide: LeaseStore,
        inject: [NATS_CONNECTION],
        useFactory: (nc: NatsConnection) => LeaseStore.open(nc, { bucket: config.CAIRN_LEASES_BUCKET, replicas: config.CAIRN_NATS_REPLICAS, observeTtlMs: config.CAIRN_LEASE_TTL_MS }),
      },
      {
        provide: ApprovalDeadlines,
        inject: [NATS_CONNECTION],
        useFactory: (nc: NatsConnection) => new ApprovalDeadlines(nc, config.CAIRN_APPROVALS_BUCKET ?? approvalsBucketFor(config.CAIRN_LEASES_BUCKET), config.CAIRN_NATS_REPLICAS),
      },
      {
        provide: PlacementQueue,
        inject: [NATS_CONNECTION],
        useFactory: (nc: NatsConnection) => PlacementQueue.open(nc, { bucket: config.CAIRN_QUEUE_BUCKET ?? queueBucketFor(config.CAIRN_LEASES_BUCKET), replicas: config.CAIRN_NATS_REPLICAS }),
      },
      Placements,
      LeaseExpiryScanner,
      ApprovalExpiryScanner,
    ],
  });
}
