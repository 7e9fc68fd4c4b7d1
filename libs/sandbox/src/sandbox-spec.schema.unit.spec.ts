import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { parseSandboxSpec } from './sandbox-spec.schema.js';

const good = {
  image: 'cairn/sandbox-busybox:1',
  caps: { wallSeconds: 10, memoryMiB: 64, pids: 32, diskMiB: 16, cpus: 0.5 },
  labels: { workerId: 'worker_1', chainId: 'run_abc' },
};

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return isCairnError(error) ? error.code : 'not a CairnError';
  }
  return undefined;
}

describe('parseSandboxSpec', () => {
  it('accepts a spec and fills the defaults', () => {
    const spec = parseSandboxSpec(good);
    expect(spec.instance).toBe(1);
    expect(spec.lifetimeSeconds).toBe(86_400);
    expect(parseSandboxSpec({ ...good, image: 'sha256:' + 'a'.repeat(64), instance: 2 }).instance).toBe(2);
  });

  it('refuses bad input with E_INPUT naming the field', () => {
    const bad = [
      { ...good, caps: { ...good.caps, memoryMiB: 4 } },
      { ...good, caps: { ...good.caps, diskMiB: 3 } },
      { ...good, caps: { ...good.caps, pids: 0 } },
      { ...good, caps: { ...good.caps, cpus: 0 } },
      { ...good, caps: { ...good.caps, wallSeconds: 1.5 } },
      { ...good, labels: { workerId: 'w', chainId: 'job_1' } },
      { ...good, labels: { workerId: 'w x', chainId: 'run_1' } },
      { ...good, image: '' },
      { ...good, image: 'a b' },
      { ...good, extra: true },
    ];
    for (const spec of bad) expect(codeOf(() => parseSandboxSpec(spec))).toBe('E_INPUT');
    try {
      parseSandboxSpec({ ...good, caps: { ...good.caps, pids: 0 } });
    } catch (error) {
      expect((error as Error).message).toContain('caps.pids');
    }
  });
});
