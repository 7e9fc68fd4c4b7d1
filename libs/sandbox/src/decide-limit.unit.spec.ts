import { describe, expect, it } from 'vitest';
import { decideLimit, firstLimit, LimitWatch, observeLimits, type LimitSample } from './decide-limit.js';

const free = (path: string, freeBlocks = 100, freeInodes = 100) => ({ path, freeBlocks, freeInodes });
const baseline: LimitSample = { atMs: 0, oomKills: 2, pidsMax: 5, tmpfs: [free('/work'), free('/tmp')] };

describe('observeLimits', () => {
  it('sees nothing when every counter is where it was', () => {
    expect(observeLimits(baseline, { ...baseline, atMs: 40 })).toEqual([]);
  });

  it('reads each cap from its own counter, as a difference to the baseline', () => {
    expect(observeLimits(baseline, { ...baseline, atMs: 10, oomKills: 3 })).toEqual([
      { limit: 'E_MEM_LIMIT', atMs: 10, evidence: 'oom_kill 2→3' },
    ]);
    expect(observeLimits(baseline, { ...baseline, atMs: 10, pidsMax: 12 })).toEqual([
      { limit: 'E_PROC_LIMIT', atMs: 10, evidence: 'pids.events max 5→12' },
    ]);
    expect(observeLimits(baseline, { ...baseline, atMs: 10, tmpfs: [free('/work', 0, 7), free('/tmp')] })).toEqual([
      { limit: 'E_DISK_LIMIT', atMs: 10, evidence: '/work: 0 free blocks' },
    ]);
    expect(observeLimits(baseline, { ...baseline, atMs: 10, tmpfs: [free('/work'), free('/tmp', 9, 0)] })).toEqual([
      { limit: 'E_DISK_LIMIT', atMs: 10, evidence: '/tmp: 0 free inodes' },
    ]);
    expect(observeLimits(baseline, { ...baseline, atMs: 10, deadlinePassed: true })).toEqual([
      { limit: 'E_TIMEOUT', atMs: 10, evidence: 'the wall-time deadline passed' },
    ]);
  });

  it('takes the engine’s OOM report when the cgroup counter cannot be read', () => {
    const blind: LimitSample = { atMs: 0 };
    expect(observeLimits(blind, { atMs: 5, oomReported: true }).map((o) => o.limit)).toEqual(['E_MEM_LIMIT']);
    expect(observeLimits({ atMs: 0, oomReported: true }, { atMs: 5, oomReported: true })).toEqual([]);
  });

  it('proves nothing from a counter it could not read before or after', () => {
    expect(observeLimits({ atMs: 0 }, { atMs: 5, oomKills: 9, pidsMax: 9 })).toEqual([]);
    expect(observeLimits(baseline, { atMs: 5 })).toEqual([]);
  });

  it('never reads an exit code: a fork bomb that exits 0 is still a process-cap hit', () => {
    // The sample has no exit code field at all; only counters decide.
    expect(observeLimits(baseline, { ...baseline, atMs: 1, pidsMax: 6 }).map((o) => o.limit)).toEqual(['E_PROC_LIMIT']);
  });

  it('lists limits seen together in precedence order', () => {
    const all: LimitSample = { atMs: 9, deadlinePassed: true, oomKills: 3, pidsMax: 6, tmpfs: [free('/work', 0, 0)] };
    expect(observeLimits(baseline, all).map((o) => o.limit)).toEqual(['E_DISK_LIMIT', 'E_PROC_LIMIT', 'E_MEM_LIMIT', 'E_TIMEOUT']);
  });
});

describe('decideLimit', () => {
  it('is null when no cap was hit', () => {
    expect(decideLimit([])).toBeNull();
  });

  it('picks the limit seen first, whatever its kind', () => {
    expect(
      decideLimit([
        { limit: 'E_DISK_LIMIT', atMs: 300, evidence: '' },
        { limit: 'E_TIMEOUT', atMs: 200, evidence: '' },
        { limit: 'E_MEM_LIMIT', atMs: 250, evidence: '' },
      ]),
    ).toBe('E_TIMEOUT');
    expect(
      decideLimit([
        { limit: 'E_TIMEOUT', atMs: 1000, evidence: '' },
        { limit: 'E_MEM_LIMIT', atMs: 120, evidence: '' },
      ]),
    ).toBe('E_MEM_LIMIT');
  });

  it('breaks a tie by precedence: disk, processes, memory, then time', () => {
    const at = (limit: 'E_TIMEOUT' | 'E_MEM_LIMIT' | 'E_PROC_LIMIT' | 'E_DISK_LIMIT') => ({ limit, atMs: 50, evidence: '' });
    expect(decideLimit([at('E_TIMEOUT'), at('E_MEM_LIMIT')])).toBe('E_MEM_LIMIT');
    expect(decideLimit([at('E_MEM_LIMIT'), at('E_PROC_LIMIT')])).toBe('E_PROC_LIMIT');
    expect(decideLimit([at('E_TIMEOUT'), at('E_PROC_LIMIT'), at('E_DISK_LIMIT')])).toBe('E_DISK_LIMIT');
    expect(firstLimit([at('E_TIMEOUT')])).toEqual(at('E_TIMEOUT'));
  });
});

describe('LimitWatch', () => {
  it('keeps the first sighting of each limit and decides by the earliest', () => {
    const watch = new LimitWatch(baseline);
    expect(watch.observe({ ...baseline, atMs: 50 })).toEqual([]);
    expect(watch.decision).toBeNull();
    expect(watch.observe({ ...baseline, atMs: 100, pidsMax: 6 }).map((o) => o.limit)).toEqual(['E_PROC_LIMIT']);
    // Still over the cap later: not a new sighting, and the first time stays.
    expect(watch.observe({ ...baseline, atMs: 150, pidsMax: 9, oomKills: 3 }).map((o) => o.limit)).toEqual(['E_MEM_LIMIT']);
    expect(watch.observe({ ...baseline, atMs: 200, deadlinePassed: true }).map((o) => o.limit)).toEqual(['E_TIMEOUT']);
    expect(watch.decision).toBe('E_PROC_LIMIT');
    expect(watch.observations.map((o) => [o.limit, o.atMs])).toEqual([
      ['E_PROC_LIMIT', 100],
      ['E_MEM_LIMIT', 150],
      ['E_TIMEOUT', 200],
    ]);
  });

  it('records one disk sighting when several mounts fill in the same sample', () => {
    const watch = new LimitWatch(baseline);
    watch.observe({ ...baseline, atMs: 10, tmpfs: [free('/work', 0), free('/tmp', 0)] });
    expect(watch.observations).toEqual([{ limit: 'E_DISK_LIMIT', atMs: 10, evidence: '/work: 0 free blocks' }]);
  });

  it('lets a cap seen in the deadline’s own sample win over the deadline', () => {
    const watch = new LimitWatch(baseline);
    watch.observe({ ...baseline, atMs: 1000, deadlinePassed: true, tmpfs: [free('/work', 0)] });
    expect(watch.decision).toBe('E_DISK_LIMIT');
    expect(watch.first?.evidence).toBe('/work: 0 free blocks');
  });
});
