export { grantLease, isExpired, leaseId, renewLease } from './lease.js';
export type { Lease, LeaseRenewal } from './lease.js';
export { planQueue, queueOrder, queuePositions } from './placement-queue.js';
export type { PlanOptions, QueuedRequest, QueuePlan, WaitingFor } from './placement-queue.js';
export {
  admitRun,
  cpuShares,
  DEFAULT_STALE_AFTER_MS,
  eligibleWorkers,
  fits,
  freeCapacity,
  isSessionId,
  liveWorkers,
  neverFits,
  placeRun,
  placement,
  recordHeartbeat,
  releaseRun,
  reservationFor,
  shortfall,
  workerStatus,
} from './worker-registry.js';
export type {
  Admission,
  FreeCapacity,
  Heartbeat,
  Isolation,
  Placement,
  PlacementRequest,
  PlaceOptions,
  Reservation,
  WorkerCapacity,
  WorkerRecord,
  WorkerStatus,
} from './worker-registry.js';
export { observedLease, observedWallTime, observedWorker, sight, Sightings } from './observed-time.js';
export type { Sighting } from './observed-time.js';
