import { ChainIdSchema } from '@cairn/contracts';
import { LABEL_KEYS, MANAGED_LABEL_VALUE, parseContainerName } from './sandbox-labels.js';

/** What a driver lists about a container: enough to decide, nothing engine-specific. */
export interface ListedContainer {
  id: string;
  names: readonly string[];
  labels: Readonly<Record<string, string>>;
}

export interface ReapTarget {
  id: string;
  name: string;
  /** null when the chain label is missing or malformed: no lease can hold such a container. */
  chainId: string | null;
}

/**
 * What this process knows of a warm-pool container (labelled with a pool, never with a chain): idle
 * in its pool, claimed by a run, or unknown — from a previous process, never trusted, reaped.
 */
export type PoolHolding = { kind: 'warm' } | { kind: 'claimed'; chainId: string } | null;

/**
 * Which of `containers` a worker reaps: only those labelled as Cairn's AND as this worker's
 * (checked here again, whatever the engine's filter returned), whose chain `keep` rejects.
 * Other workers', other tools' and unlabelled containers are never targets. A pool container is
 * kept while `pooled` says it is idle in this process's pool, judged by its run's chain once claimed
 * (known to this process, or named `cairn-<chain id>-<n>` by its claim), and reaped otherwise.
 */
export function planReconcile(
  containers: readonly ListedContainer[],
  workerId: string,
  keep: (chainId: string) => boolean,
  pooled: (container: ListedContainer) => PoolHolding = () => null,
): ReapTarget[] {
  const targets: ReapTarget[] = [];
  for (const container of containers) {
    if (container.labels[LABEL_KEYS.managed] !== MANAGED_LABEL_VALUE) continue;
    if (container.labels[LABEL_KEYS.worker] !== workerId) continue;
    let label = container.labels[LABEL_KEYS.chain];
    if (label === undefined && container.labels[LABEL_KEYS.pool] !== undefined) {
      const holding = pooled(container);
      if (holding?.kind === 'warm') continue;
      if (holding?.kind === 'claimed') label = holding.chainId;
      // A claim is renamed to its run's `cairn-<chain id>-<n>`: after a restart, the name says whose it was.
      else label = container.names.map((n) => parseContainerName(n)?.chainId).find((c) => c !== undefined);
    }
    const chainId = label !== undefined && ChainIdSchema.safeParse(label).success ? label : null;
    if (chainId !== null && keep(chainId)) continue;
    const name = (container.names[0] ?? container.id).replace(/^\//, '');
    targets.push({ id: container.id, name, chainId });
  }
  return targets;
}

