import { ChainIdSchema } from '@cairn/contracts';
import type { SandboxLabels } from './sandbox-spec.schema.js';

/**
 * Labels every Cairn container carries, so a runtime can find its own sandboxes again after a
 * crash and reap only those (PRODUCT.md, "Reconcile without harm").
 */
export const LABEL_KEYS = Object.freeze({
  managed: 'io.cairn.managed',
  worker: 'io.cairn.worker',
  chain: 'io.cairn.chain',
  pool: 'io.cairn.pool',
});

export const MANAGED_LABEL_VALUE = '1';

export function sandboxLabels(labels: SandboxLabels): Record<string, string> {
  const out: Record<string, string> = {
    [LABEL_KEYS.managed]: MANAGED_LABEL_VALUE,
    [LABEL_KEYS.worker]: labels.workerId,
    [LABEL_KEYS.chain]: labels.chainId,
  };
  if (labels.pool !== undefined) out[LABEL_KEYS.pool] = labels.pool;
  return out;
}

/**
 * A warm pool's container: Cairn's, this worker's, its profile — and no chain until a run claims it
 * (labels cannot change, so the claim lives in the runtime's memory; see `planReconcile`).
 */
export function poolLabels(workerId: string, poolId: string): Record<string, string> {
  return { [LABEL_KEYS.managed]: MANAGED_LABEL_VALUE, [LABEL_KEYS.worker]: workerId, [LABEL_KEYS.pool]: poolId };
}

/** Docker filters that select one worker's managed containers (the engine side of the check). */
export function workerLabelFilters(workerId: string): string[] {
  return [`${LABEL_KEYS.managed}=${MANAGED_LABEL_VALUE}`, `${LABEL_KEYS.worker}=${workerId}`];
}

export const CONTAINER_NAME_PREFIX = 'cairn-';

/** `cairn-<chain id>-<n>`: derived from the run, so a restarted runtime finds it by name too. */
export function containerName(chainId: string, instance: number): string {
  if (!ChainIdSchema.safeParse(chainId).success) throw new RangeError(`not a chain id: ${JSON.stringify(chainId)}`);
  if (!Number.isInteger(instance) || instance < 1) throw new RangeError(`instance must be a positive integer, got ${instance}`);
  return `${CONTAINER_NAME_PREFIX}${chainId}-${instance}`;
}

export const POOL_NAME_PREFIX = `${CONTAINER_NAME_PREFIX}pool-`;

/** `cairn-pool-<profile>-<serial>`: a warm container's name, which it keeps once claimed. */
export function poolContainerName(poolId: string, serial: string): string {
  return `${POOL_NAME_PREFIX}${poolId}-${serial}`;
}

const NAME_PATTERN = /^\/?cairn-((?:run|sbx)_[a-z0-9][a-z0-9_-]*)-([1-9][0-9]*)$/;

/** The inverse of `containerName`; Docker reports names with a leading `/`, which is accepted. */
export function parseContainerName(name: string): { chainId: string; instance: number } | null {
  const match = NAME_PATTERN.exec(name);
  if (match?.[1] === undefined || match[2] === undefined) return null;
  if (!ChainIdSchema.safeParse(match[1]).success) return null;
  return { chainId: match[1], instance: Number(match[2]) };
}
