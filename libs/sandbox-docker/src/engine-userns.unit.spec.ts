import { describe, expect, it } from 'vitest';
import { hostIdsOf, parseEngineUserns } from './engine-userns.js';

describe("the engine's user-namespace remapping", () => {
  it('is off where `docker info` names no userns option', () => {
    expect(parseEngineUserns({ SecurityOptions: ['name=seccomp,profile=default'], DockerRootDir: '/var/lib/docker' })).toEqual({ remapped: false, base: null });
    expect(parseEngineUserns({})).toEqual({ remapped: false, base: null });
    expect(hostIdsOf({ uid: 65520, gid: 65520 }, { remapped: false, base: null })).toEqual({ uid: 65520, gid: 65520 });
  });

  it('is on, from the ids its data root is named for, where it names one', () => {
    const userns = parseEngineUserns({ SecurityOptions: ['name=seccomp,profile=default', 'name=userns'], DockerRootDir: '/var/lib/docker/100000.100001' });
    expect(userns).toEqual({ remapped: true, base: { uid: 100000, gid: 100001 } });
    expect(hostIdsOf({ uid: 65520, gid: 65520 }, userns)).toEqual({ uid: 165520, gid: 165521 });
  });

  it('is E_RUNTIME_ABSENT when on but its ids cannot be told (nothing the host makes for a sandbox would be its own)', () => {
    expect(() => parseEngineUserns({ SecurityOptions: ['name=userns'], DockerRootDir: '/var/lib/docker' })).toThrow(expect.objectContaining({ code: 'E_RUNTIME_ABSENT' }) as Error);
  });
});
