import { describe, expect, it } from 'vitest';
import { harborSpecOf } from './harbor-submission.js';

const IMAGE = `cairn/built:0123456789abcdef@sha256:${'c'.repeat(64)}`;
const b64 = (text: string) => Buffer.from(text).toString('base64');
const FILES = [
  { path: 'task.toml', content: b64('[agent]\ntimeout_sec = 10\n') },
  { path: 'instruction.md', content: b64('Do it.\n') },
  { path: 'environment/Dockerfile', content: b64(`FROM ${IMAGE}\n`) },
  { path: 'tests/test.sh', content: b64('#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n'), mode: 0o755 },
];

describe('a Harbor task upload', () => {
  it('given a task on an image already there and an agent, when mapped, then it is the prebuilt layout on that image, named by the upload', () => {
    const spec = harborSpecOf({ files: FILES, agent: ['sh', '-c', 'true'], name: 'hello', job: 'batch-1' });
    expect(spec).toMatchObject({ name: 'harbor: hello', image: IMAGE, job: 'batch-1', network: 'none' });
    expect(spec.steps.map((s) => s.name)).toEqual(['setup', 'agent', 'verify']);
    expect(spec.files?.map((f) => f.path)).toEqual(['/work/harbor/instruction.md', '/work/harbor/tests/test.sh']);
    expect(spec.steps[1]?.timeoutSeconds).toBe(10);
  });

  it.each([
    [{ files: FILES, agent: ['true'], tenant: 'other' }, 'tenant: unknown field'],
    [{ files: FILES.map((f) => (f.path === 'instruction.md' ? { ...f, content: 'not base64!' } : f)), oracle: true }, 'files[1].content'],
    [{ files: [...FILES, FILES[0]], agent: ['true'] }, 'given twice'],
    [{ files: FILES, oracle: true }, 'solution/solve.sh is missing'],
    [{ files: FILES, oracle: false }, 'exactly one'],
    [{ files: FILES, agent: ['true'], name: '../up' }, 'name'],
    [[], 'expected object'],
  ])('given %j, when mapped, then it is E_INPUT naming %s', (body, text) => {
    expect(() => harborSpecOf(body)).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining(text) as unknown }));
  });
});
