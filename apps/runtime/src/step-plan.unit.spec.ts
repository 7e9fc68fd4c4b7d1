import { describe, expect, it } from 'vitest';
import { DEFAULT_WORKDIR, planSteps, sandboxLifetimeSeconds, stepTimeoutMs, toolName } from './step-plan.js';

const caps = { wall_seconds: 60, memory_mib: 64, pids: 32, disk_mib: 16, cpus: 1 };

describe('toolName', () => {
  it('is the base name of the program', () => {
    expect(toolName('/usr/bin/python3')).toBe('python3');
    expect(toolName('sh')).toBe('sh');
    expect(toolName('./run.sh')).toBe('run.sh');
    expect(toolName('/opt/tools/')).toBe('tools');
  });

  it('keeps a program that is only slashes, and caps the length', () => {
    expect(toolName('/')).toBe('/');
    expect(toolName('x'.repeat(300))).toHaveLength(256);
  });

  it('never cuts a surrogate pair in half (a lone surrogate cannot go on the chain)', () => {
    const tool = toolName(`/bin/${'x'.repeat(255)}\u{1F600}`);
    expect(tool).toBe('x'.repeat(255));
    expect(tool.isWellFormed()).toBe(true);
    expect(toolName(`${'x'.repeat(254)}\u{1F600}`)).toBe(`${'x'.repeat(254)}\u{1F600}`);
  });
});

describe('stepTimeoutMs', () => {
  it("is the step's own timeout when it has one", () => {
    expect(stepTimeoutMs({ timeoutSeconds: 5 }, caps)).toBe(5000);
  });

  it('is the wall cap when the step names none', () => {
    expect(stepTimeoutMs({}, caps)).toBe(60_000);
  });

  it('refuses (never clamps) a step that asks for more than the cap', () => {
    expect(stepTimeoutMs({ timeoutSeconds: 60 }, caps)).toBe(60_000);
    expect(stepTimeoutMs({ timeoutSeconds: 61 }, caps)).toBeNull();
  });
});

describe('planSteps', () => {
  it('plans every step with its index, tool, workdir, env names and timeout', () => {
    const plan = planSteps(
      [
        { argv: ['sh', '-c', 'echo hi'], env: { ZED: '1', ALPHA: '2' } },
        { argv: ['/bin/cat', 'x'], workdir: '/out', timeoutSeconds: 3 },
      ],
      caps,
    );
    expect(plan).toEqual({
      ok: true,
      steps: [
        { index: 0, argv: ['sh', '-c', 'echo hi'], tool: 'sh', workdir: DEFAULT_WORKDIR, env: { ZED: '1', ALPHA: '2' }, envNames: ['ALPHA', 'ZED'], timeoutMs: 60_000 },
        { index: 1, argv: ['/bin/cat', 'x'], tool: 'cat', workdir: '/out', env: {}, envNames: [], timeoutMs: 3000 },
      ],
    });
  });

  it('names the first step over the cap', () => {
    expect(planSteps([{ argv: ['a'] }, { argv: ['b'], timeoutSeconds: 120 }], caps)).toEqual({
      ok: false,
      stepIndex: 1,
      message: 'steps[1].timeoutSeconds 120 exceeds the granted wall time of 60 s',
    });
  });
});

describe('sandboxLifetimeSeconds', () => {
  it('covers every step plus a margin, and never more than a day', () => {
    const plan = planSteps([{ argv: ['a'], timeoutSeconds: 10 }, { argv: ['b'] }], caps);
    expect(plan.ok && sandboxLifetimeSeconds(plan.steps)).toBe(10 + 60 + 600);
    const long = planSteps(Array.from({ length: 64 }, () => ({ argv: ['a'] })), { ...caps, wall_seconds: 86_400 });
    expect(long.ok && sandboxLifetimeSeconds(long.steps)).toBe(86_400);
  });
});
