import type { LeaseRecord, RegisteredWorker } from '@cairn/operational';
import { describe, expect, it } from 'vitest';
import { hasImage, imageMissing, withLeasedReservations } from './placement.js';

const A = `sha256:${'a'.repeat(64)}`;
const B = `sha256:${'b'.repeat(64)}`;

function worker(workerId: string, overrides: Partial<RegisteredWorker> = {}): RegisteredWorker {
  return {
    workerId,
    capacity: { slots: 2, memoryMiB: 4096, cpus: 2, diskMiB: 4096 },
    isolation: ['docker'],
    draining: false,
    healthy: true,
    lastHeartbeatAt: 0,
    inFlight: [],
    images: { 'cairn/sandbox-busybox:1': A },
    ...overrides,
  };
}

function lease(runId: string, workerId: string, memoryMiB = 512): LeaseRecord {
  return {
    lease_id: `lease_${runId}`,
    run_id: runId,
    worker_id: workerId,
    attempt: 1,
    granted_at: '2026-01-01T00:00:00.000Z',
    expires_at: '2026-01-01T00:00:15.000Z',
    reservation: { runId, memoryMiB, cpus: 1, diskMiB: 256 },
  };
}

describe('withLeasedReservations', () => {
  it('adds the leased runs to their workers, once each', () => {
    const reported = { runId: 'run_a', memoryMiB: 100, cpus: 1, diskMiB: 1 };
    const [w1, w2] = withLeasedReservations([worker('w1', { inFlight: [reported] }), worker('w2')], [lease('run_a', 'w1'), lease('run_b', 'w1'), lease('run_c', 'w2')]);
    expect(w1!.inFlight.map((r) => r.runId)).toEqual(['run_a', 'run_b']);
    expect(w1!.inFlight[0]!.memoryMiB).toBe(512);
    expect(w2!.inFlight.map((r) => r.runId)).toEqual(['run_c']);
  });

  it('drops a reported run that no longer holds a lease: it has finished since the heartbeat', () => {
    const finished = { runId: 'run_done', memoryMiB: 100, cpus: 1, diskMiB: 1 };
    const [w1] = withLeasedReservations([worker('w1', { inFlight: [finished] })], [lease('run_new', 'w1')]);
    expect(w1!.inFlight.map((r) => r.runId)).toEqual(['run_new']);
  });
});

describe('hasImage', () => {
  it('matches the tag, and the digest when the decision pins one', () => {
    const w = worker('w1');
    expect(hasImage(w, 'cairn/sandbox-busybox:1')).toBe(true);
    expect(hasImage(w, `cairn/sandbox-busybox:1@${A}`)).toBe(true);
    expect(hasImage(w, `cairn/sandbox-busybox:1@${B}`)).toBe(false);
    expect(hasImage(w, 'cairn/sandbox-debian:1')).toBe(false);
    expect(hasImage(w, 'constructor')).toBe(false);
  });
});

describe('imageMissing', () => {
  const STALE = 15_000;
  const now = 100_000;
  const live = (id: string, images: Record<string, string>) => worker(id, { lastHeartbeatAt: now - 1000, images });

  it('says so once the run has waited past the stale period while every live worker lacks the image', () => {
    const workers = [live('w1', { 'cairn/sandbox-busybox:1': A }), live('w2', {})];
    expect(imageMissing(workers, 'cairn/sandbox-debian:1', now - STALE, now, STALE)).toBe(2);
    // Within it, a worker may yet report it (a build, a worker starting): the run waits.
    expect(imageMissing(workers, 'cairn/sandbox-debian:1', now - STALE + 1, now, STALE)).toBeNull();
  });

  it('never while a live worker has it (with the digest asked for), or while no worker is live', () => {
    expect(imageMissing([live('w1', { 'cairn/sandbox-busybox:1': A })], 'cairn/sandbox-busybox:1', 0, now, STALE)).toBeNull();
    expect(imageMissing([live('w1', { 'cairn/sandbox-busybox:1': A })], `cairn/sandbox-busybox:1@${B}`, 0, now, STALE)).toBe(1);
    // A stale or draining worker says nothing of images: with no live one, the run waits for a runtime.
    expect(imageMissing([worker('w-old', { lastHeartbeatAt: now - STALE - 1, images: {} })], 'cairn/sandbox-debian:1', 0, now, STALE)).toBeNull();
    expect(imageMissing([live('w-drain', {}), { ...live('w-drain2', {}), draining: true }].slice(1), 'cairn/sandbox-debian:1', 0, now, STALE)).toBeNull();
  });
});
