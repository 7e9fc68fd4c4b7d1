export { LeaseExpiryScanner } from './lease-expiry.scanner.js';
export type { LeaseVerdict } from './lease-expiry.scanner.js';
export { hasImage, withLeasedReservations } from './placement.js';
export { SchedulerConfigSchema } from './scheduler.config.js';
export type { SchedulerConfig } from './scheduler.config.js';
export { SCHEDULER_SERVICE, schedulerModule } from './scheduler.module.js';
export { PLACEMENT_GATE, Placements, runnableDecision } from './placements.service.js';
export { SchedulingHandler } from './scheduling.handler.js';
export { SerialGate } from './serial-gate.js';
