export { grantLease, isExpired, leaseId, onLeaseExpired, renewLease } from './lease.js';
export type { ExpiredLeaseRun, Lease, LeaseExpiry, LeaseRenewal } from './lease.js';
export {
  admitRun,
  DEFAULT_STALE_AFTER_MS,
  eligibleWorkers,
  fits,
  freeCapacity,
  placeRun,
  recordHeartbeat,
  releaseRun,
  reservationFor,
  workerStatus,
} from './worker-registry.js';
export type {
  Admission,
  FreeCapacity,
  Heartbeat,
  Isolation,
  PlacementRequest,
  PlaceOptions,
  Reservation,
  WorkerCapacity,
  WorkerRecord,
  WorkerStatus,
} from './worker-registry.js';
