import type { SandboxCaps } from './sandbox-spec.schema.js';

/** The writable paths of every sandbox; the root file system is read-only. */
export const WRITABLE_MOUNTS = ['/tmp', '/work', '/out', '/dev/shm'] as const;
export type WritableMount = (typeof WRITABLE_MOUNTS)[number];

/** Where files may be put into and read out of a sandbox (`/dev/shm` is scratch, not a file drop). */
export const FILE_ROOTS = ['/work', '/out', '/tmp'] as const;

export interface TmpfsMount {
  path: WritableMount;
  sizeMiB: number;
  /** `nr_inodes`: a million empty files must meet ENOSPC too, not eat kernel memory. */
  inodes: number;
  /** Programs may run from `/work` and `/out`; `/tmp` and `/dev/shm` are `noexec`. */
  exec: boolean;
}

/** One inode per 8 KiB of space: room for source trees of small files, bounded kernel memory. */
export const INODES_PER_MIB = 128;

const inodesFor = (sizeMiB: number): number => sizeMiB * INODES_PER_MIB;

/**
 * Splits `diskMiB` over the writable mounts so that the sizes add up to exactly `diskMiB`:
 * `/work` ½ (it also takes the rounding), `/out` ¼, `/tmp` ⅛, `/dev/shm` ⅛, each at least 1 MiB.
 */
export function tmpfsLayout(diskMiB: number): TmpfsMount[] {
  if (!Number.isInteger(diskMiB) || diskMiB < WRITABLE_MOUNTS.length) {
    throw new RangeError(`diskMiB must be an integer of at least ${WRITABLE_MOUNTS.length}, got ${diskMiB}`);
  }
  const eighth = Math.max(1, Math.floor(diskMiB / 8));
  const quarter = Math.max(1, Math.floor(diskMiB / 4));
  const work = diskMiB - 2 * eighth - quarter;
  return [
    { path: '/tmp', sizeMiB: eighth, inodes: inodesFor(eighth), exec: false },
    { path: '/work', sizeMiB: work, inodes: inodesFor(work), exec: true },
    { path: '/out', sizeMiB: quarter, inodes: inodesFor(quarter), exec: true },
    { path: '/dev/shm', sizeMiB: eighth, inodes: inodesFor(eighth), exec: false },
  ];
}

/**
 * tmpfs pages are charged to the container's memory cgroup, so the limit is the processes'
 * memory plus the whole disk: a disk fill meets ENOSPC before the OOM killer.
 */
export function memoryLimitMiB(caps: Pick<SandboxCaps, 'memoryMiB' | 'diskMiB'>): number {
  return caps.memoryMiB + caps.diskMiB;
}
