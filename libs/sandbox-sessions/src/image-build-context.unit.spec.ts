import type { RegisteredWorker, WorkerDrain } from '@cairn/operational';
import { describe, expect, it } from 'vitest';
import { chooseBuildWorker, packBuildContext, unpackBuildContext } from './image-build-context.js';

const text = (s: string) => new TextEncoder().encode(s);

function worker(id: string, images: Record<string, string> = {}, over: Partial<RegisteredWorker> = {}): RegisteredWorker {
  return {
    workerId: id,
    capacity: { slots: 4, memoryMiB: 4096, cpus: 2, diskMiB: 8192 },
    isolation: ['docker'],
    draining: false,
    healthy: true,
    lastHeartbeatAt: 1_000_000,
    inFlight: [],
    images,
    ...over,
  };
}

describe('a build context as it travels', () => {
  it('given a Dockerfile and files, when packed and unpacked, then the same Dockerfile, paths, bytes and modes come back', () => {
    const packed = packBuildContext('FROM x\n', [{ path: 'a.txt', content: text('hello') }, { path: 'bin/run.sh', content: text('#!/bin/sh\n'), mode: 0o755 }]);
    expect(packed.dockerfileBytes).toBe(7);
    expect(packed.files).toEqual([{ path: 'a.txt', bytes: 5, mode: 0o644 }, { path: 'bin/run.sh', bytes: 10, mode: 0o755 }]);
    const op = { bytes: packed.payload.byteLength, sha256: packed.sha256, dockerfile_bytes: packed.dockerfileBytes, files: packed.files };
    const back = unpackBuildContext(op, packed.payload);
    expect(back.dockerfile).toBe('FROM x\n');
    expect(back.files.map((f) => [f.path, new TextDecoder().decode(f.content), f.mode])).toEqual([['a.txt', 'hello', 0o644], ['bin/run.sh', '#!/bin/sh\n', 0o755]]);
  });

  it('given a payload that is not what the op names, when unpacked, then it is E_INPUT', () => {
    const packed = packBuildContext('FROM x\n', [{ path: 'a.txt', content: text('hello') }]);
    const op = { bytes: packed.payload.byteLength, sha256: packed.sha256, dockerfile_bytes: packed.dockerfileBytes, files: packed.files };
    const changed = new Uint8Array(packed.payload);
    changed[changed.length - 1] = 0x21;
    expect(() => unpackBuildContext(op, changed)).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining('do not match') as unknown }));
    expect(() => unpackBuildContext({ ...op, files: [{ path: 'a.txt', bytes: 4, mode: 0o644 }] }, packed.payload)).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining('manifest') as unknown }));
  });

  it.each([
    ['../up', 'a relative path'],
    ['/etc/passwd', 'a relative path'],
    ['a//b', 'a relative path'],
  ])('given the path %j, when packed, then it is E_INPUT', (path, message) => {
    expect(() => packBuildContext('FROM x\n', [{ path, content: text('x') }])).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining(message) as unknown }));
  });

  it('given a file twice or an empty Dockerfile, when packed, then it is E_INPUT', () => {
    expect(() => packBuildContext('FROM x\n', [{ path: 'a', content: text('x') }, { path: 'a', content: text('y') }])).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining('twice') as unknown }));
    expect(() => packBuildContext('', [])).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining('empty') as unknown }));
  });
});

describe('the worker that builds', () => {
  const now = 1_000_500;
  const base = 'cairn/sandbox-busybox:1';
  const id = `sha256:${'a'.repeat(64)}`;

  it('given live workers, then the same content always goes to the same one, and other content spreads over them', () => {
    const workers = ['w1', 'w2', 'w3', 'w4'].map((w) => worker(w, { [base]: id }));
    const pick = (sha: string) => chooseBuildWorker(workers, new Map(), { bases: [base], contentSha256: sha, now })?.workerId;
    expect(pick('1'.repeat(64))).toBe(pick('1'.repeat(64)));
    expect(chooseBuildWorker([...workers].reverse(), new Map(), { bases: [base], contentSha256: '1'.repeat(64), now })?.workerId).toBe(pick('1'.repeat(64)));
    const chosen = new Set(Array.from({ length: 32 }, (_, i) => pick(i.toString(16).padStart(64, '0'))));
    expect(chosen.size).toBeGreaterThan(1);
  });

  it('given workers of which one has the base images, then it is that one; none has them: any live one', () => {
    const workers = [worker('w1'), worker('w2', { [base]: id }), worker('w3')];
    for (let i = 0; i < 8; i++) expect(chooseBuildWorker(workers, new Map(), { bases: [base], contentSha256: String(i).repeat(64), now })?.workerId).toBe('w2');
    expect(chooseBuildWorker([worker('w1'), worker('w3')], new Map(), { bases: [base], contentSha256: '0'.repeat(64), now })).not.toBeNull();
  });

  it('given stale, unhealthy, draining or drained workers only, then there is none; a full one still builds', () => {
    const drain: WorkerDrain = { workerId: 'w4', drainedAt: 1, by: 'key:k' };
    const gone = [worker('w1', {}, { lastHeartbeatAt: 0 }), worker('w2', {}, { healthy: false }), worker('w3', {}, { draining: true }), worker('w4')];
    expect(chooseBuildWorker(gone, new Map([['w4', drain]]), { bases: [], contentSha256: '0'.repeat(64), now })).toBeNull();
    const full = worker('w5', {}, { capacity: { slots: 0, memoryMiB: 0, cpus: 0, diskMiB: 0 } });
    expect(chooseBuildWorker([...gone, full], new Map([['w4', drain]]), { bases: [], contentSha256: '0'.repeat(64), now })?.workerId).toBe('w5');
  });
});
