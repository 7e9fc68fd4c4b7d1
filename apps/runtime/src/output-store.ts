import type { ArtifactStore } from '@cairn/artifact-store';
import { isCairnError } from '@cairn/contracts';

const EMPTY = new Uint8Array(0);

/** The artifact store refused a put for want of room (its max_bytes): E_CAPACITY, the run's or exec's to end on. */
export function isStoreFull(error: unknown): boolean {
  return isCairnError(error) && error.code === 'E_CAPACITY' && error.details?.['reason'] === 'artifact_store_full';
}

/**
 * A step's or exec's stdout and stderr into the store, before the receipt that names them. A full
 * store keeps neither: both are then the empty artifact (stored at boot, so always there) and
 * `full` says so — the receipt never names bytes the store does not hold (docs/adr/0021).
 */
export async function putStreams(artifacts: ArtifactStore, stdout: Uint8Array, stderr: Uint8Array): Promise<{ stdoutSha256: string; stderrSha256: string; full: boolean }> {
  try {
    const [stdoutSha256, stderrSha256] = await Promise.all([artifacts.put(stdout), artifacts.put(stderr)]);
    return { stdoutSha256, stderrSha256, full: false };
  } catch (error) {
    if (!isStoreFull(error)) throw error;
    const empty = await artifacts.put(EMPTY);
    return { stdoutSha256: empty, stderrSha256: empty, full: true };
  }
}
