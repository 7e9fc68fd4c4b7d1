import { ChainIdSchema } from '@cairn/contracts';
import { LABEL_KEYS, MANAGED_LABEL_VALUE } from './sandbox-labels.js';

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
 * Which of `containers` a worker reaps: only those labelled as Cairn's AND as this worker's
 * (checked here again, whatever the engine's filter returned), whose chain `keep` rejects.
 * Other workers', other tools' and unlabelled containers are never targets.
 */
export function planReconcile(
  containers: readonly ListedContainer[],
  workerId: string,
  keep: (chainId: string) => boolean,
): ReapTarget[] {
  const targets: ReapTarget[] = [];
  for (const container of containers) {
    if (container.labels[LABEL_KEYS.managed] !== MANAGED_LABEL_VALUE) continue;
    if (container.labels[LABEL_KEYS.worker] !== workerId) continue;
    const label = container.labels[LABEL_KEYS.chain];
    const chainId = label !== undefined && ChainIdSchema.safeParse(label).success ? label : null;
    if (chainId !== null && keep(chainId)) continue;
    const name = (container.names[0] ?? container.id).replace(/^\//, '');
    targets.push({ id: container.id, name, chainId });
  }
  return targets;
}

