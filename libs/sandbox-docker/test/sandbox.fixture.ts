import { isCairnError } from '@cairn/contracts';
import type { SandboxSpecInput } from '@cairn/sandbox';
import { uniqueName } from '@cairn/testing';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { BUSYBOX_IMAGE_TAG, createDockerClient, defaultAgentSocketRoot, DockerSandboxDriver, ensureBusyboxImage, type DockerSandboxDriverOptions } from '../src/index.js';

/**
 * What the Docker int tests share: a driver, a worker id of the test file's own (every container
 * it makes carries it), small caps, and a cleanup that removes every container labelled with the
 * worker ids it was given — also after a failed test.
 */
export function sandboxFixture(prefix: string, options: DockerSandboxDriverOptions = {}) {
  const docker = createDockerClient();
  const workerId = uniqueName(`${prefix}-wrk`);
  const driver = new DockerSandboxDriver({ docker, ...options });

  const chainId = (): string => `run_${uniqueName(prefix).toLowerCase()}`;

  const spec = (overrides: { caps?: Partial<SandboxSpecInput['caps']>; workerId?: string; chainId?: string } = {}): SandboxSpecInput => ({
    image: BUSYBOX_IMAGE_TAG,
    caps: { wallSeconds: 30, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5, ...overrides.caps },
    labels: { workerId: overrides.workerId ?? workerId, chainId: overrides.chainId ?? chainId() },
  });

  const ready = () => ensureBusyboxImage({ docker });

  /** Removes the workers' containers, and their agent socket directories (the driver's own teardown was bypassed). */
  async function removeLabelled(workerIds: readonly string[]): Promise<void> {
    for (const id of workerIds) {
      const listed = await docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${id}`] } });
      await Promise.all(listed.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
      await rm(join(defaultAgentSocketRoot(), id), { recursive: true, force: true });
    }
  }

  /** 404 from the engine: the container is gone (I-8). */
  async function engineKnows(id: string): Promise<boolean> {
    try {
      await docker.getContainer(id).inspect();
      return true;
    } catch (error) {
      if ((error as { statusCode?: number }).statusCode === 404) return false;
      throw error;
    }
  }

  return { docker, driver, workerId, chainId, spec, ready, removeLabelled, engineKnows };
}

export const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString('utf8');

/** The error code of a rejected promise (or a note that it did not reject with a CairnError). */
export async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'resolved';
  } catch (error) {
    return isCairnError(error) ? error.code : `not a CairnError: ${String(error)}`;
  }
}

/** Whether a host pid still exists. */
export async function pidAlive(pid: number): Promise<boolean> {
  return readFile(`/proc/${pid}/stat`, 'utf8').then(
    () => true,
    () => false,
  );
}
