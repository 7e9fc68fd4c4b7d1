import { describe, expect, it } from 'vitest';
import { formatDensityBench, leftBehind } from './sandboxes-density.bench.js';
import { formatSandboxesBench } from './sandboxes.bench.js';

describe('the sandboxes bench report', () => {
  it('prints p50/p90 of each side, the ratios and whether the targets were met', () => {
    const text = formatSandboxesBench({
      firstExec: {
        cairn: { name: 'cairn first', ms: [40, 45, 50, 60] },
        cairnCreate: { name: 'cairn create', ms: [30, 30, 30, 30] },
        raw: { name: 'raw first', ms: [400, 420, 440, 460] },
        met: true,
        warmHits: 4,
      },
      exec: { cairn: { name: 'cairn exec', ms: [13, 13, 13] }, raw: { name: 'raw exec', ms: [10, 10, 10] }, ratio: 1.3, met: false },
      load: { before: [1, 0.5, 0.25], after: [1.5, 0.75, 0.3] },
    });
    expect(text).toContain('4/4 sessions started with a warm container ready');
    expect(text).toMatch(/cairn first\s+p50\s+47\.5 ms\s+p90\s+60\.0 ms\s+\(n=4\)/);
    expect(text).toContain('Cairn / raw p50: 0.11×   Cairn p50 47.5 ms (target ≤ 50 ms: met)');
    expect(text).toContain('Cairn / raw p50: 1.30×   (target ≤ 1.20×: MISSED)');
    expect(text).toContain('load average (1, 5, 15 min): before 1.00 0.50 0.25, after 1.50 0.75 0.30');
  });
});

describe('the density bench report', () => {
  const result = (left = 0) => ({
    opened: 112,
    refused: { code: 'E_CAPACITY', resource: 'memory', message: 'memory ran out' },
    ceiling: 150,
    create: [20, 22, 24, 26],
    open: [30, 32, 34, 36],
    firstExec: [
      { level: 1, ms: [40, 42, 44] },
      { level: 100, ms: [45, 48, 80] },
    ],
    warm: { hits: 17, probes: 18, refillMs: [300, 400, 500] },
    exec: [15, 16, 17, 18],
    memory: { container: 1.25, shim: 3.5, runtime: 0.2, host: 6 },
    baseline: { opened: 112, create: [10, 11, 12, 13], open: [15, 16, 17, 18], exec: [10, 10, 12, 12], memory: { container: 0.5, shim: 3.5, runtime: null, host: 4 }, left },
    idleCpu: { runtime: 12, machine: 90 },
    left: { containers: 0, reservedSlots: 0, open: 0 },
    load: { before: [1, 1, 1], after: [2, 2, 2] },
  });

  it('prints how many were held and why the next was refused, memory per idle sandbox, first exec at each level, exec across them, and what was left', () => {
    const text = formatDensityBench(result());
    expect(text).toContain('density: 112 sandboxes of 128 MiB (+64 MiB disk, 1 CPU) open at once; the next refused E_CAPACITY (memory)');
    expect(text).toContain('memory per idle sandbox: container 1.25 MiB, engine shim 3.50 MiB, runtime 0.20 MiB; host 6.00 MiB');
    expect(text).toMatch(/at {3}1 open {3}p50 {4}42\.0 ms {3}p99 {4}44\.0 ms {3}\(n=3\)/);
    expect(text).toContain('probes that found a warm sandbox: 17/18 (each level\'s first makes its profile warm); refill after a claim p50 400 ms');
    expect(text).toContain('exec (`true`) across all 112: p50 16.5 ms');
    expect(text).toContain('idle CPU (ms per s, 112 open): machine 90.0, runtime 12.0');
    expect(text).toContain('first exec p50 at 100 open 48.0 ms (target ≤ 50 ms: met)');
    expect(text).toContain('after closing them all: 0 open, 0 containers, 0 slots held, 0 raw containers (nothing left)');
  });

  it('sets each figure beside the raw docker baseline of the same run, with the ratio', () => {
    const text = formatDensityBench(result());
    expect(text).toContain('baseline, same run: 112 raw hardened containers (docker run -d, same caps and image) open at once');
    expect(text).toMatch(/memory per idle: host +6\.00 MiB +4\.00 MiB +1\.50×/);
    expect(text).toMatch(/memory per idle: container +1\.25 MiB +0\.50 MiB +2\.50×/);
    expect(text).toMatch(/create \(201 \/ docker run -d\) p50 +23\.00 ms +11\.50 ms +2\.00×/);
    expect(text).toMatch(/create → first exec output p95 +36\.00 ms +18\.00 ms +2\.00×/);
    expect(text).toMatch(/exec `true` across them p50 +16\.50 ms +11\.00 ms +1\.50×/);
  });

  it('counts raw containers left behind as left behind', () => {
    expect(leftBehind(result())).toBe(0);
    expect(leftBehind(result(2))).toBe(2);
    expect(formatDensityBench(result(2))).toContain('2 raw containers (LEFT BEHIND)');
  });
});
