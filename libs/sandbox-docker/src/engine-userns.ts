import { CairnError } from '@cairn/contracts';
import type Docker from 'dockerode';
import type { SandboxUser } from './container-config.js';
import { engineError } from './docker-client.js';

/**
 * The engine's user-namespace remapping (`dockerd --userns-remap`), an engine-wide setting no
 * container can ask for: container uid N runs as host uid `base + N`. `docker info` says whether it
 * is on (`SecurityOptions` names `name=userns`); the base is not in the API, but the engine keeps
 * its state under a data root named for it (`<data-root>/<uid>.<gid>`), which `DockerRootDir` shows.
 */
export interface EngineUserns {
  remapped: boolean;
  /** Host ids of container id 0; null without remapping. */
  base: SandboxUser | null;
}

/** The remapping `docker info` reports; `E_RUNTIME_ABSENT` when it is on but its base cannot be told. */
export function parseEngineUserns(info: unknown): EngineUserns {
  const record = typeof info === 'object' && info !== null ? (info as Record<string, unknown>) : {};
  const options = Array.isArray(record.SecurityOptions) ? record.SecurityOptions.filter((o): o is string => typeof o === 'string') : [];
  const remapped = options.some((option) => option.split(',').includes('name=userns'));
  if (!remapped) return { remapped: false, base: null };
  const root = typeof record.DockerRootDir === 'string' ? record.DockerRootDir : '';
  const match = /\/(\d+)\.(\d+)\/?$/.exec(root);
  if (match === null) {
    throw new CairnError('E_RUNTIME_ABSENT', `the engine remaps user namespaces, but its data root ${JSON.stringify(root)} does not name the remapped ids`, { root });
  }
  return { remapped: true, base: { uid: Number(match[1]), gid: Number(match[2]) } };
}

/** Asks the engine (`docker info`). */
export async function engineUserns(docker: Docker): Promise<EngineUserns> {
  let info: unknown;
  try {
    info = await docker.info();
  } catch (error) {
    throw engineError(error, 'E_RUNTIME_ABSENT', 'asking the container engine about user namespaces');
  }
  return parseEngineUserns(info);
}

/** The host ids a sandbox user runs as on an engine (shifted by the remapping, if any). */
export function hostIdsOf(user: SandboxUser, userns: EngineUserns): SandboxUser {
  return userns.base === null ? user : { uid: userns.base.uid + user.uid, gid: userns.base.gid + user.gid };
}
