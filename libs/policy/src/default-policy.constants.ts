import { deepFreeze } from '@cairn/contracts';
import type { PolicyDocument } from '@cairn/contracts';

export const DEFAULT_SANDBOX_IMAGES = ['cairn/sandbox-busybox:1', 'cairn/sandbox-debian:1'] as const;
/** Where `cairn images build --file` tags what it builds (docs/adr/0018): admitted by digest only. */
export const BUILT_IMAGES_REPOSITORY = 'cairn/built';

/**
 * The policy in force when an operator has written none: the two locally built sandbox images and
 * the images built here from Dockerfiles (each requested by digest),
 * small default caps, the frozen caps as maxima, no egress, and every `apply` step held for a person.
 * Frozen so that nothing can raise a cap in it at run time (I-6).
 */
export const DEFAULT_POLICY: PolicyDocument = deepFreeze({
  version: 1,
  defaultImage: 'cairn/sandbox-busybox:1',
  images: { allow: [...DEFAULT_SANDBOX_IMAGES.map((name) => ({ name })), { repository: BUILT_IMAGES_REPOSITORY, requireDigest: true as const }] },
  caps: {
    defaults: { wallSeconds: 60, memoryMiB: 256, pids: 64, diskMiB: 256, cpus: 1 },
    max: { wallSeconds: 600, memoryMiB: 4096, pids: 256, diskMiB: 8192, cpus: 4 },
  },
  network: { egress: 'deny' },
  approvals: { rules: [{ when: 'apply_step' }] },
  budgets: { runsPerJob: 6, jobMinutes: 90 },
});
