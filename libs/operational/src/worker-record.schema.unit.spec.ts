import { describe, expect, it } from 'vitest';
import { liveImageDigests, RegisteredWorkerSchema } from './worker-record.schema.js';
import type { RegisteredWorker } from './worker-record.schema.js';

const A = `sha256:${'a'.repeat(64)}`;
const B = `sha256:${'b'.repeat(64)}`;
const NOW = 1_000_000;

function worker(workerId: string, images: Record<string, string>, overrides: Partial<RegisteredWorker> = {}): RegisteredWorker {
  return {
    workerId,
    capacity: { slots: 2, memoryMiB: 4096, cpus: 2, diskMiB: 4096 },
    isolation: ['docker'],
    draining: false,
    healthy: true,
    lastHeartbeatAt: NOW,
    inFlight: [],
    images,
    ...overrides,
  };
}

describe('liveImageDigests', () => {
  it('unites the images of live workers', () => {
    const workers = [worker('w1', { 'cairn/sandbox-busybox:1': A }), worker('w2', { 'cairn/sandbox-debian:1': B, 'cairn/sandbox-busybox:1': A })];
    expect(liveImageDigests(workers, NOW)).toEqual({ 'cairn/sandbox-busybox:1': A, 'cairn/sandbox-debian:1': B });
  });

  it('ignores stale and unhealthy workers, but not draining ones', () => {
    const workers = [
      worker('stale', { 'x:1': A }, { lastHeartbeatAt: NOW - 60_000 }),
      worker('sick', { 'y:1': A }, { healthy: false }),
      worker('draining', { 'z:1': B }, { draining: true }),
    ];
    expect(liveImageDigests(workers, NOW)).toEqual({ 'z:1': B });
  });

  it('leaves out a tag whose live workers disagree on the digest', () => {
    expect(liveImageDigests([worker('w1', { 'x:1': A, 'y:1': A }), worker('w2', { 'x:1': B })], NOW)).toEqual({ 'y:1': A });
  });
});

describe('RegisteredWorkerSchema', () => {
  it('refuses image keys with digests and digests that are not sha256', () => {
    expect(RegisteredWorkerSchema.safeParse(worker('w', { [`x:1@${A}`]: A })).success).toBe(false);
    expect(RegisteredWorkerSchema.safeParse(worker('w', { 'x:1': 'latest' })).success).toBe(false);
    expect(RegisteredWorkerSchema.safeParse(worker('w', { 'x:1': A })).success).toBe(true);
  });
});
