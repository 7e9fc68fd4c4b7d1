import { describe, expect, it } from 'vitest';
import { cairnCpuPerRunMs, formatRunsBench, median, percentile, throughput, timePhase } from './runs.bench.js';
import type { Phase } from './runs.bench.js';

describe('the runs bench arithmetic', () => {
  it('takes medians and percentiles of per-run times', () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(Number.isNaN(median([]))).toBe(true);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90)).toBe(9);
    expect(percentile([7], 90)).toBe(7);
  });

  it('times each run and the phase, keeping at most `parallel` in flight', async () => {
    let inFlight = 0;
    let most = 0;
    const phase = await timePhase('p', 6, 2, async () => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      await new Promise((resolve) => setTimeout(resolve, 20));
      inFlight -= 1;
    });
    expect(phase.perRunMs).toHaveLength(6);
    expect(most).toBe(2);
    expect(phase.totalMs).toBeGreaterThanOrEqual(55);
    // The machine's busy CPU over the phase, read from /proc/stat on Linux.
    expect(phase.machineCpuMs).toBeGreaterThanOrEqual(0);
    expect(throughput({ ...phase, totalMs: 3000 })).toBe(2);
  });

  it('reports the ratios against the targets', () => {
    const phase = (name: string, ms: number, totalMs: number): Phase => ({ name, runs: 4, perRunMs: [ms, ms, ms, ms], totalMs, machineCpuMs: totalMs * 2 });
    const text = formatRunsBench({
      sequential: { cairn: phase('cairn', 300, 1200), raw: phase('raw', 250, 1000), ratio: 1.2, met: true },
      inFlight: { cairn: phase('cairn', 600, 800), raw: phase('raw', 500, 500), share: 0.625 },
      cpuPerRunMs: { runtime: 12.5, gateway: 40.25, 'nats-server': 3, postgres: 2, 'postgres (shared background)': 1.5 },
      ownNats: true,
    });
    expect(text).toContain('Cairn / raw per run: 1.20×   (target ≤ 1.25×: met)');
    // Each phase's machine CPU per run: what four in flight share out.
    expect(text).toMatch(/cairn .*machine CPU 400 ms\/run/);
    expect(text).toContain('Cairn throughput / raw: 63%');
    // Processes by CPU, the costliest first, and their sum against the budget; the shared background is shown apart.
    expect(text).toMatch(/gateway +40\.3 ms\n +runtime +12\.5 ms\n +nats-server +3\.0 ms\n +postgres +2\.0 ms\n +all +57\.8 ms {3}\(target ≤ 50 ms: MISSED\)/);
    expect(text).toContain("(PostgreSQL's shared background processes, not counted: 1.5 ms)");
    // Raw Docker's CPU per run: the machine's, in each raw phase.
    expect(text).toContain("raw Docker's CPU per run (the whole machine during the raw phases): 500 ms sequential, 250 ms at 4 in flight");
    expect(cairnCpuPerRunMs({ cpuPerRunMs: { a: 1, 'postgres (shared background)': 9 } })).toBe(1);
  });
});
