import { describe, expect, it } from 'vitest';
import type { HarborTask, TaskFile } from './harbor-task.js';
import { harborImageAdditions, harborRunSpec, harborTaskFromFiles, prebuiltEnvironmentImage } from './harbor-task.js';
import { parseTaskToml } from './task-toml.schema.js';

const IMAGE = `cairn/built:0123456789abcdef@sha256:${'a'.repeat(64)}`;
const BUILT = { image: IMAGE, layout: 'built' as const };
const text = (content: string) => new TextEncoder().encode(content);

function file(path: string, content: string, mode = 0o644): TaskFile {
  return { path, content: text(content), mode };
}

function files(toml = '', extra: TaskFile[] = []): TaskFile[] {
  return [
    file('task.toml', toml),
    file('instruction.md', 'Say hello.\n'),
    file('environment/Dockerfile', 'FROM cairn/sandbox-busybox:1\n'),
    file('tests/test.sh', '#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n', 0o755),
    file('solution/solve.sh', '#!/bin/sh\ntrue\n', 0o755),
    ...extra,
  ];
}

function task(toml: string): HarborTask {
  return harborTaskFromFiles(files(toml), { where: '/tasks/hello', name: 'hello' });
}

describe('task.toml', () => {
  it('given a Harbor task.toml, when parsed, then the limits become caps and step timeouts, and the reward the rubric', () => {
    const toml = ['version = "1.0"', '[metadata]', 'difficulty = "easy"', '[verifier]', 'timeout_sec = 120.0', 'env = { MODE = "strict" }', '[agent]', 'timeout_sec = 300.5', '[environment]', 'cpus = 2', 'memory = "1G"', 'storage_mb = 512'].join('\n');
    const spec = harborRunSpec(task(toml), BUILT, { kind: 'oracle' });
    expect(spec.caps).toEqual({ wallSeconds: 301, memoryMiB: 1024, diskMiB: 512, cpus: 2 });
    expect(spec.network).toBe('none');
    expect(spec.steps.map((s) => [s.name, s.timeoutSeconds])).toEqual([['setup', undefined], ['oracle', 301], ['verify', 120]]);
    expect(spec.steps[2]?.env).toEqual({ MODE: 'strict' });
    expect(spec.files?.map((f) => f.path)).toEqual(['/work/harbor/instruction.md', '/work/harbor/solution/solve.sh']);
    expect(spec.checks).toEqual([{ id: 'reward', kind: 'reward', sources: ['artifacts["/out/harbor-logs/verifier/reward.txt"]', 'artifacts["/out/harbor-logs/verifier/reward.json"].json.reward'], weight: 1 }]);
  });

  it('given an agent instead of the oracle, when mapped, then its argv runs with the instruction file and no solution is given', () => {
    const spec = harborRunSpec(task(''), BUILT, { kind: 'agent', argv: ['python3', '/work/agent.py'] });
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
    ['[[verifier.judge]]\nid = "clarity"\ncriterion = "clear"\nsource = "/etc/passwd"', 'verifier.judge[0].source'],
    ['[[verifier.judge]]\nid = "clarity"\ncriterion = "clear"\nsource = "/logs/agent/../../etc/passwd"', 'verifier.judge[0].source'],
    ['[[verifier.judge]]\nid = "clarity"\nsource = "agent.stdout"', 'verifier.judge[0].criterion'],
    ['[[verifier.judge]]\nid = "reward"\ncriterion = "x"\nsource = "agent.stdout"', 'verifier.judge[0].id'],
    ['[[verifier.judge]]\nid = "c"\ncriterion = "x"\nsource = "agent.stdout"\nscale = 1000', 'verifier.judge[0].scale'],
    ['[[verifier.judge]]\nid = "c"\ncriterion = "x"\nsource = "agent.stdout"\nmodel = "gpt"', 'verifier.judge[0].model: unknown field'],
    ['[[verifier.judge]]\nid = "c"\ncriterion = "x"\nsource = "agent.stdout"\n[[verifier.judge]]\nid = "c"\ncriterion = "y"\nsource = "agent.stderr"', 'verifier.judge[1].id'],
  ])('given %j, when parsed, then it is E_INPUT naming %s', (toml, field) => {
    expect(() => parseTaskToml(toml, 'task.toml')).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining(field) as unknown }));
  });

  it('given text that is not TOML, when parsed, then it is E_INPUT', () => {
    expect(() => parseTaskToml('[verifier\n', 'task.toml')).toThrow(expect.objectContaining({ code: 'E_INPUT' }));
  });

  it('given [[verifier.judge]] entries, when mapped, then each is a kind: judge criterion beside the reward, reading the step or the /logs file it names', () => {
    const toml = [
      '[[verifier.judge]]', 'id = "clarity"', 'criterion = "The agent explains what it did."', 'source = "agent.stdout"', 'weight = 2', 'scale = 5',
      '[[verifier.judge]]', 'id = "notes"', 'criterion = "The notes are complete."', 'source = "/logs/agent/notes.md"',
      '[[verifier.judge]]', 'id = "report"', 'criterion = "The report is readable."', 'source = "verifier.stderr"',
    ].join('\n');
    const spec = harborRunSpec(task(toml), BUILT, { kind: 'oracle' });
    expect(spec.checks?.slice(1)).toEqual([
      { id: 'clarity', kind: 'judge', criterion: 'The agent explains what it did.', source: 'steps[1].stdout', weight: 2, scale: 5 },
      { id: 'notes', kind: 'judge', criterion: 'The notes are complete.', source: 'artifacts["/out/harbor-logs/agent/notes.md"]', weight: 1 },
      { id: 'report', kind: 'judge', criterion: 'The report is readable.', source: 'steps[2].stderr', weight: 1 },
    ]);
  });

  it('given a task, when its image additions are made, then the tests go to /tests and /logs and /solution become symlinks', () => {
    const additions = harborImageAdditions(task(''));
    expect(additions.files.map((f) => [f.path, f.mode])).toEqual([['.cairn-harbor/tests/test.sh', 0o755]]);
    expect(additions.dockerfile.startsWith('FROM cairn/sandbox-busybox:1\n')).toBe(true);
    expect(additions.dockerfile).toContain('ln -sfn /out/harbor-logs /logs');
  });
});

describe('a task from its files', () => {
  it.each([
    ['../escape', 'no traversal'],
    ['tests/../../etc/passwd', 'no traversal'],
    ['/etc/passwd', 'an absolute path'],
    ['tests//x', 'empty'],
    ['tests\\x', 'a backslash'],
    ['README.md', 'not part of a Harbor task'],
    ['secrets/key', 'not part of a Harbor task'],
  ])('given a file at %j, when the task is made, then it is E_INPUT (%s) and names it', (path, why) => {
    expect(() => harborTaskFromFiles(files('', [file(path, 'x')]), { where: 'upload', name: 't' })).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining(why) as unknown }));
  });

  it.each(['task.toml', 'instruction.md', 'environment/Dockerfile', 'tests/test.sh'])('given no %s, when the task is made, then it is E_INPUT naming it', (missing) => {
    expect(() => harborTaskFromFiles(files().filter((f) => f.path !== missing), { where: 'upload', name: 't' })).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining(`${missing} is missing`) as unknown }));
  });

  it('given more files or bytes than the limits, or a task.toml that is not UTF-8, when the task is made, then it is E_INPUT', () => {
    expect(() => harborTaskFromFiles(files(), { where: 'upload', name: 't', limits: { files: 4, bytes: 1 << 20 } })).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining('at most 4') as unknown }));
    expect(() => harborTaskFromFiles(files(), { where: 'upload', name: 't', limits: { files: 10, bytes: 20 } })).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining('at most 20') as unknown }));
    const latin1 = files().map((f) => (f.path === 'task.toml' ? { ...f, content: new Uint8Array([0xff, 0xfe]) } : f));
    expect(() => harborTaskFromFiles(latin1, { where: 'upload', name: 't' })).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining('not UTF-8') as unknown }));
  });

  it('given a task.toml without a name, when the task is made, then the given name names it; with one, its own', () => {
    expect(harborTaskFromFiles(files(), { where: 'upload', name: 'my-dir' }).name).toBe('my-dir');
    expect(harborTaskFromFiles(files('[task]\nname = "org/hello world"'), { where: 'upload', name: 'my-dir' }).name).toBe('org/hello-world');
  });
});

describe('a task on an image already there (prebuilt)', () => {
  const ref = `cairn/built:0123456789abcdef@sha256:${'b'.repeat(64)}`;

  it('given a Dockerfile of one FROM, when its image is asked for, then it is that image, and the tests are input files linked from /tests', () => {
    const t = harborTaskFromFiles(files('', []).map((f) => (f.path === 'environment/Dockerfile' ? file(f.path, `# the environment\nFROM ${ref}\n`) : f)), { where: 'upload', name: 't' });
    const image = prebuiltEnvironmentImage(t);
    expect(image).toBe(ref);
    const spec = harborRunSpec(t, { image, layout: 'prebuilt' }, { kind: 'oracle' });
    expect(spec.image).toBe(ref);
    expect(spec.files?.map((f) => [f.path, f.mode])).toEqual([['/work/harbor/instruction.md', undefined], ['/work/harbor/solution/solve.sh', 0o755], ['/work/harbor/tests/test.sh', 0o755]]);
    expect(spec.steps[0]?.argv.join(' ')).toContain('readlink /logs');
    expect(spec.steps[2]?.argv.at(-1)).toContain('exec /tests/test.sh');
  });

  it.each([
    ['FROM cairn/sandbox-busybox:1\nRUN apk add python3\n', '2 instructions'],
    ['FROM cairn/sandbox-busybox:1 AS base\n', 'is not FROM <image>'],
    ['FROM ${BASE}\n', 'is not an image reference'],
    ['RUN true\n', 'is not FROM <image>'],
  ])('given the Dockerfile %j, when its image is asked for, then it is E_INPUT (%s)', (dockerfile, why) => {
    const t = harborTaskFromFiles(files().map((f) => (f.path === 'environment/Dockerfile' ? file(f.path, dockerfile) : f)), { where: 'upload', name: 't' });
    expect(() => prebuiltEnvironmentImage(t)).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining(why) as unknown }));
  });

  it('given a build context beside the Dockerfile, when its image is asked for, then it is E_INPUT: nothing would use it', () => {
    const t = harborTaskFromFiles(files('', [file('environment/app.py', 'print(1)')]), { where: 'upload', name: 't' });
    expect(() => prebuiltEnvironmentImage(t)).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining('environment/app.py') as unknown }));
  });
});
