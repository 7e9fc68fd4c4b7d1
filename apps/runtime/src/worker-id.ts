import { WorkerIdSchema } from '@cairn/contracts';

const FALLBACK_WORKER_ID = 'worker';

/**
 * A worker id from the host name: lower-case `[a-z0-9_.-]`, starting with a letter or digit, at
 * most 64 characters (a receipt token and a container label value). Anything else becomes `-`.
 */
export function workerIdFromHostname(hostname: string): string {
  const id = hostname
    .toLowerCase()
    .replace(/[^a-z0-9_.-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 64)
    .replace(/[^a-z0-9]+$/, '');
  return WorkerIdSchema.safeParse(id).success ? id : FALLBACK_WORKER_ID;
}

/**
 * The runtime's durable consumer (docs/adr/0003): `cairn-runtime-<worker id>`. NATS consumer names
 * may not hold `.`, which a worker id may.
 */
export function runtimeDurableName(workerId: string): string {
  return `cairn-runtime-${workerId.replace(/\./g, '_')}`;
}
