import { describe, expect, it } from 'vitest';
import { cgroupCounterCandidates, parseKeyedCounters, parseProcCgroup, parseSandboxLook } from './cgroup-files.js';

const id = 'a'.repeat(64);

describe('cgroup files', () => {
  it('parses /proc/<pid>/cgroup (v1 with the hybrid v2 line)', () => {
    const text = `9:name=systemd:/docker/${id}\n8:pids:/docker/${id}\n4:memory:/docker/${id}\n2:cpu,cpuacct:/docker/${id}\n0::/docker/${id}\n`;
    expect(parseProcCgroup(text)).toContainEqual({ hierarchy: 2, controllers: ['cpu', 'cpuacct'], path: `/docker/${id}` });
    expect(parseProcCgroup(text)).toContainEqual({ hierarchy: 0, controllers: [], path: `/docker/${id}` });
  });

  it('parses counter files', () => {
    const oom = parseKeyedCounters('oom_kill_disable 0\nunder_oom 0\noom_kill 3\n');
    expect(oom.get('oom_kill')).toBe(3);
    expect(parseKeyedCounters('max 17\n').get('max')).toBe(17);
    expect(parseKeyedCounters('garbage').size).toBe(0);
  });

  it('tries the paths the init reports first, then the engine’s usual layouts', () => {
    const v1 = cgroupCounterCandidates('/sys/fs/cgroup', id, parseProcCgroup(`8:pids:/docker/${id}\n4:memory:/docker/${id}\n`));
    expect(v1.oomKills[0]).toBe(`/sys/fs/cgroup/memory/docker/${id}/memory.oom_control`);
    expect(v1.pidsEvents[0]).toBe(`/sys/fs/cgroup/pids/docker/${id}/pids.events`);
    const v2 = cgroupCounterCandidates('/sys/fs/cgroup', id, parseProcCgroup(`0::/system.slice/docker-${id}.scope\n`));
    expect(v2.oomKills[0]).toBe(`/sys/fs/cgroup/system.slice/docker-${id}.scope/memory.events`);
    expect(v2.pidsEvents[0]).toBe(`/sys/fs/cgroup/system.slice/docker-${id}.scope/pids.events`);
    const blind = cgroupCounterCandidates('/sys/fs/cgroup', id, []);
    expect(blind.oomKills).toContain(`/sys/fs/cgroup/memory/system.slice/docker-${id}.scope/memory.oom_control`);
    expect(new Set(blind.pidsEvents).size).toBe(blind.pidsEvents.length);
  });

  it('parses the look from inside a sandbox', () => {
    const text = [
      '/sys/fs/cgroup/memory/memory.oom_control:oom_kill 2',
      '/sys/fs/cgroup/pids/pids.events:max 5',
      '/tmp 256 1000',
      '/work 0 900',
      'noise',
    ].join('\n');
    expect(parseSandboxLook(text)).toEqual({
      oomKills: 2,
      pidsMax: 5,
      tmpfs: [
        { path: '/tmp', freeBlocks: 256, freeInodes: 1000 },
        { path: '/work', freeBlocks: 0, freeInodes: 900 },
      ],
    });
    expect(parseSandboxLook('/sys/fs/cgroup/memory.events:oom_kill 1\n/sys/fs/cgroup/pids.events:max 0')).toEqual({ oomKills: 1, pidsMax: 0 });
    expect(parseSandboxLook('')).toEqual({});
  });
});
