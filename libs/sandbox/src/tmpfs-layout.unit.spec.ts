import { describe, expect, it } from 'vitest';
import { INODES_PER_MIB, memoryLimitMiB, tmpfsLayout, WRITABLE_MOUNTS } from './tmpfs-layout.js';

const sizes = (diskMiB: number) => Object.fromEntries(tmpfsLayout(diskMiB).map((m) => [m.path, m.sizeMiB]));

describe('tmpfsLayout', () => {
  it('covers every writable mount, and only /work and /out may run programs', () => {
    const layout = tmpfsLayout(256);
    expect(layout.map((m) => m.path).sort()).toEqual([...WRITABLE_MOUNTS].sort());
    expect(layout.filter((m) => m.exec).map((m) => m.path)).toEqual(['/work', '/out']);
  });

  it('splits the disk cap ½ /work, ¼ /out, ⅛ /tmp, ⅛ /dev/shm', () => {
    expect(sizes(256)).toEqual({ '/work': 128, '/out': 64, '/tmp': 32, '/dev/shm': 32 });
    expect(sizes(8192)).toEqual({ '/work': 4096, '/out': 2048, '/tmp': 1024, '/dev/shm': 1024 });
  });

  it('adds up to exactly diskMiB, every mount at least 1 MiB, /work taking the rounding', () => {
    for (let disk = 4; disk <= 300; disk++) {
      const layout = tmpfsLayout(disk);
      expect(layout.reduce((sum, m) => sum + m.sizeMiB, 0)).toBe(disk);
      for (const m of layout) expect(m.sizeMiB).toBeGreaterThanOrEqual(1);
      const work = layout.find((m) => m.path === '/work')!;
      for (const m of layout) expect(work.sizeMiB).toBeGreaterThanOrEqual(m.sizeMiB);
    }
    expect(sizes(4)).toEqual({ '/work': 1, '/out': 1, '/tmp': 1, '/dev/shm': 1 });
    expect(sizes(13)).toEqual({ '/work': 8, '/out': 3, '/tmp': 1, '/dev/shm': 1 });
  });

  it('bounds inodes in proportion to size', () => {
    for (const m of tmpfsLayout(64)) expect(m.inodes).toBe(m.sizeMiB * INODES_PER_MIB);
  });

  it('refuses a disk cap too small to give every mount a MiB', () => {
    expect(() => tmpfsLayout(3)).toThrow(RangeError);
    expect(() => tmpfsLayout(10.5)).toThrow(RangeError);
  });
});

describe('memoryLimitMiB', () => {
  it('is the processes’ memory plus the whole disk, because tmpfs pages are charged to memory', () => {
    expect(memoryLimitMiB({ memoryMiB: 256, diskMiB: 512 })).toBe(768);
  });
});
