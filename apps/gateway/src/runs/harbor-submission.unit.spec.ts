import type { BuiltImage } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { harborSpecOf, harborUploadOf, imageBuildOf } from './harbor-submission.js';

const b64 = (text: string) => Buffer.from(text).toString('base64');
const DOCKERFILE = 'FROM cairn/sandbox-busybox:1\nRUN ["/bin/sh", "-c", "echo hi > /opt/hi"]\nCOPY app.py /opt/app.py\n';
const FILES = [
  { path: 'task.toml', content: b64('[agent]\ntimeout_sec = 10\n[environment]\nbuild_timeout_sec = 90.5\n') },
  { path: 'instruction.md', content: b64('Do it.\n') },
  { path: 'environment/Dockerfile', content: b64(DOCKERFILE) },
  { path: 'environment/app.py', content: b64('print(1)\n') },
  { path: 'tests/test.sh', content: b64('#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n'), mode: 0o755 },
];
const BUILT: BuiltImage = {
  tag: 'cairn/built:0123456789abcdef',
  image_id: `sha256:${'c'.repeat(64)}`,
  digest: 'd'.repeat(64),
  dockerfile_sha256: 'e'.repeat(64),
  bases: [{ ref: 'cairn/sandbox-busybox:1', id: `sha256:${'b'.repeat(64)}` }],
  cached: false,
  duration_ms: 1200,
  worker_id: 'local',
};

describe('a Harbor task upload', () => {
  it('given a task with a Dockerfile and a context, when read, then the build is the Dockerfile with the Harbor additions, environment/ at the root and the tests under .cairn-harbor/', () => {
    const upload = harborUploadOf({ files: FILES, agent: ['sh', '-c', 'true'], name: 'hello', job: 'batch-1' });
    expect(upload.build.dockerfile.startsWith(DOCKERFILE)).toBe(true);
    expect(upload.build.dockerfile).toContain('COPY .cairn-harbor/ /');
    expect(upload.build.files.map((f) => [f.path, f.mode])).toEqual([
      ['Dockerfile', 0o644],
      ['app.py', 0o644],
      ['.cairn-harbor/tests/test.sh', 0o755],
    ]);
    expect(upload.build.bases).toEqual(['cairn/sandbox-busybox:1']);
    expect(upload.build.timeoutSeconds).toBe(91);
  });

  it('given the worker\'s build, when mapped, then the run is the built layout on the image pinned by id, with the build recorded and no tests among its input files', () => {
    const spec = harborSpecOf(harborUploadOf({ files: FILES, agent: ['sh', '-c', 'true'], name: 'hello', job: 'batch-1' }), BUILT);
    expect(spec).toMatchObject({ name: 'harbor: hello', image: `cairn/built:0123456789abcdef@sha256:${'c'.repeat(64)}`, job: 'batch-1', network: 'none' });
    expect(spec.imageBuild).toEqual({ digest: BUILT.digest, dockerfileSha256: BUILT.dockerfile_sha256, bases: BUILT.bases, imageId: BUILT.image_id, cached: false });
    expect(spec.steps.map((s) => s.name)).toEqual(['setup', 'agent', 'verify']);
    expect(spec.files?.map((f) => f.path)).toEqual(['/work/harbor/instruction.md']);
    expect(spec.steps[1]?.timeoutSeconds).toBe(10);
    expect(imageBuildOf({ ...BUILT, cached: true }).imageBuild.cached).toBe(true);
  });

  it.each([
    [{ files: FILES, agent: ['true'], tenant: 'other' }, 'tenant: unknown field'],
    [{ files: FILES.map((f) => (f.path === 'instruction.md' ? { ...f, content: 'not base64!' } : f)), oracle: true }, 'files[1].content'],
    [{ files: [...FILES, FILES[0]], agent: ['true'] }, 'given twice'],
    [{ files: FILES, oracle: true }, 'solution/solve.sh is missing'],
    [{ files: FILES, oracle: false }, 'exactly one'],
    [{ files: FILES, agent: ['true'], name: '../up' }, 'name'],
    [{ files: FILES.map((f) => (f.path === 'environment/Dockerfile' ? { ...f, content: b64('FROM ${BASE}\n') } : f)), agent: ['true'] }, 'uses a variable'],
    [{ files: FILES.map((f) => (f.path === 'environment/Dockerfile' ? { ...f, content: b64('RUN true\n') } : f)), agent: ['true'] }, 'no FROM'],
    [{ files: [...FILES, { path: 'environment/.cairn-harbor/tests/test.sh', content: b64('x') }], agent: ['true'] }, "Cairn's own names"],
    [{ files: [...FILES, { path: 'environment/key.txt', content: b64('AKIAIOSFODNN7EXAMPLE\n') }], agent: ['true'] }, 'key.txt'],
    [[], 'expected object'],
  ])('given %j, when read, then it is E_INPUT naming %s, before anything is built', (body, text) => {
    expect(() => harborUploadOf(body)).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining(text) as unknown }));
  });
});
