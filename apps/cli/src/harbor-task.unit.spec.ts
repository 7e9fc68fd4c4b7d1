import { describe, expect, it } from 'vitest';
import type { HarborTask } from './harbor-task.js';
import { harborImageAdditions, harborRunSpec, parseTaskToml } from './harbor-task.js';

const IMAGE = `cairn/built:0123456789abcdef@sha256:${'a'.repeat(64)}`;

function task(toml: string): HarborTask {
  return {
    dir: '/tasks/hello',
    name: 'hello',
    config: parseTaskToml(toml, 'task.toml'),
    instruction: 'Say hello.\n',
    dockerfile: 'FROM cairn/sandbox-busybox:1\n',
    contextDir: '/tasks/hello/environment',
    tests: [{ path: 'tests/test.sh', content: Buffer.from('#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n'), mode: 0o755 }],
    solution: [{ path: 'solution/solve.sh', content: Buffer.from('#!/bin/sh\ntrue\n'), mode: 0o755 }],
  };
}

describe('task.toml', () => {
  it('given a Harbor task.toml, when parsed, then the limits become caps and step timeouts, and the reward the rubric', () => {
    const toml = ['version = "1.0"', '[metadata]', 'difficulty = "easy"', '[verifier]', 'timeout_sec = 120.0', 'env = { MODE = "strict" }', '[agent]', 'timeout_sec = 300.5', '[environment]', 'cpus = 2', 'memory = "1G"', 'storage_mb = 512'].join('\n');
    const spec = harborRunSpec(task(toml), IMAGE, { kind: 'oracle' });
    expect(spec.caps).toEqual({ wallSeconds: 301, memoryMiB: 1024, diskMiB: 512, cpus: 2 });
    expect(spec.network).toBe('none');
    expect(spec.steps.map((s) => [s.name, s.timeoutSeconds])).toEqual([['setup', undefined], ['oracle', 301], ['verify', 120]]);
    expect(spec.steps[2]?.env).toEqual({ MODE: 'strict' });
    expect(spec.files?.map((f) => f.path)).toEqual(['/work/harbor/instruction.md', '/work/harbor/solution/solve.sh']);
    expect(spec.checks).toEqual([{ id: 'reward', kind: 'reward', sources: ['artifacts["/out/harbor-logs/verifier/reward.txt"]', 'artifacts["/out/harbor-logs/verifier/reward.json"].json.reward'], weight: 1 }]);
  });

  it('given an agent instead of the oracle, when mapped, then its argv runs with the instruction file and no solution is given', () => {
    const spec = harborRunSpec(task(''), IMAGE, { kind: 'agent', argv: ['python3', '/work/agent.py'] });
    expect(spec.caps).toBeUndefined();
    expect(spec.steps[1]).toEqual({ name: 'agent', argv: ['python3', '/work/agent.py'], env: { HARBOR_INSTRUCTION_FILE: '/work/harbor/instruction.md' } });
    expect(spec.files?.map((f) => f.path)).toEqual(['/work/harbor/instruction.md']);
  });

  it.each([
    ['[environment]\ngpus = 1', 'environment.gpus'],
    ['[environment]\nshiny = true', 'environment.shiny: unknown field'],
    ['[agent]\nuser = "root"', 'agent.user'],
    ['[verifier]\ntimeout_sec = -1', 'verifier.timeout_sec'],
    ['[environment]\nenv = { TOKEN = "${TOKEN}" }', 'environment.env.TOKEN'],
    ['[environment]\nhealthcheck = { command = "true" }', 'environment.healthcheck'],
    ['colour = "red"', 'colour: unknown field'],
  ])('given %j, when parsed, then it is E_INPUT naming %s', (toml, field) => {
    expect(() => parseTaskToml(toml, 'task.toml')).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining(field) as unknown }));
  });

  it('given text that is not TOML, when parsed, then it is E_INPUT', () => {
    expect(() => parseTaskToml('[verifier\n', 'task.toml')).toThrow(expect.objectContaining({ code: 'E_INPUT' }));
  });

  it('given a task, when its image additions are made, then the tests go to /tests and /logs and /solution become symlinks', () => {
    const additions = harborImageAdditions(task(''));
    expect(additions.files.map((f) => [f.path, f.mode])).toEqual([['.cairn-harbor/tests/test.sh', 0o755]]);
    expect(additions.dockerfile.startsWith('FROM cairn/sandbox-busybox:1\n')).toBe(true);
    expect(additions.dockerfile).toContain('ln -sfn /out/harbor-logs /logs');
  });
});
