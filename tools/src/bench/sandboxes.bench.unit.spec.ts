import { describe, expect, it } from 'vitest';
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
