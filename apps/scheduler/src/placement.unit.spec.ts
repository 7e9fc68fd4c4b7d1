import type { LeaseRecord, RegisteredWorker } from '@cairn/operational';
import { describe, expect, it } from 'vitest';
import { capacityAmount, fullMessage, hasImage, imageMissing, neverMessage, withLeasedReservations, withPlaced } from './placement.js';

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

  it('never while a drained worker that is heard from has it: the run waits for the drain to be lifted', () => {
    const eligible = live('w1', {});
    const drained = { ...live('w2', { 'cairn/sandbox-debian:1': A }), draining: true };
    expect(imageMissing([eligible, drained], 'cairn/sandbox-debian:1', 0, now, STALE)).toBeNull();
    // A drained worker gone stale, or one with another digest, keeps no run waiting.
    expect(imageMissing([eligible, { ...drained, lastHeartbeatAt: now - STALE - 1 }], 'cairn/sandbox-debian:1', 0, now, STALE)).toBe(1);
    expect(imageMissing([eligible, drained], `cairn/sandbox-debian:1@${B}`, 0, now, STALE)).toBe(1);
  });
});

describe('the capacity refusal', () => {
  const sandbox = { runId: 'sbx_new', memoryMiB: 128, cpus: 1, diskMiB: 64, pids: 64 };
  const held = (n: number, memoryMiB = 128, cpus = 1) => Array.from({ length: n }, (_, i) => ({ runId: `sbx_${i}`, memoryMiB, cpus, diskMiB: 64, pids: 64 }));
  const STALE = 15_000;

  it('names what ran out, what it needs and the most free, with units, on one worker', () => {
    const full = worker('w1', { capacity: { slots: 10, memoryMiB: 1000, cpus: 2, diskMiB: 4096, pids: 10_000, cpuOversubscription: 64 }, inFlight: held(7) });
    expect(fullMessage('sbx_new', sandbox, 'memory', [full], 0, STALE)).toBe(
      'no worker has room for sbx_new: memory ran out (it needs 128 MiB of memory; the live worker has 104 MiB of memory free); try again later, or ask to wait (waitSeconds)',
    );
    const noSlot = worker('w1', { capacity: { slots: 2, memoryMiB: 4096, cpus: 2, diskMiB: 4096 }, inFlight: held(2) });
    expect(fullMessage('sbx_new', sandbox, 'slots', [noSlot], 0, STALE)).toContain('slots ran out (it needs 1 slot; the live worker has no slot free)');
  });

  it("gives a run's CPU as what the runs' share leaves, not the sandboxes' larger share", () => {
    const run = { runId: 'run_new', memoryMiB: 128, cpus: 1, diskMiB: 64 };
    // 2 CPUs: sandboxes may take 8 CPUs of share, runs 2; one run holds 1.5 of them.
    const w = worker('w1', { capacity: { slots: 10, memoryMiB: 4096, cpus: 2, diskMiB: 4096, cpuOversubscription: 4, runCpuOversubscription: 1 }, inFlight: [{ runId: 'run_a', memoryMiB: 128, cpus: 1.5, diskMiB: 64 }] });
    expect(fullMessage('run_new', run, 'cpu', [w], 0, STALE)).toContain('cpu ran out (it needs 1 CPU; the live worker has 0.5 CPU free)');
  });

  it('does not let a worker short of something else contradict the figure: each is named by what it lacks', () => {
    const slotsFull = worker('w1', { capacity: { slots: 1, memoryMiB: 4096, cpus: 2, diskMiB: 4096 }, inFlight: held(1) });
    const memoryShort = worker('w2', { capacity: { slots: 10, memoryMiB: 200, cpus: 2, diskMiB: 4096, cpuOversubscription: 64 }, inFlight: held(1) });
    const memoryShorter = worker('w3', { capacity: { slots: 10, memoryMiB: 150, cpus: 2, diskMiB: 4096, cpuOversubscription: 64 }, inFlight: held(1) });
    const text = fullMessage('sbx_new', sandbox, 'memory', [slotsFull, memoryShort, memoryShorter], 0, STALE);
    expect(text).toContain('memory ran out (it needs 128 MiB of memory; of the 3 live workers, 2 have at most 72 MiB of memory free; 1 has no slot free)');
  });

  it('leaves out workers that are not live, and ones that could never hold it', () => {
    const stale = worker('gone', { capacity: { slots: 10, memoryMiB: 100_000, cpus: 2, diskMiB: 4096 }, lastHeartbeatAt: -60_000 });
    const tiny = worker('tiny', { capacity: { slots: 10, memoryMiB: 64, cpus: 2, diskMiB: 4096 } });
    const full = worker('w1', { capacity: { slots: 10, memoryMiB: 200, cpus: 2, diskMiB: 4096, cpuOversubscription: 64 }, inFlight: held(1) });
    expect(fullMessage('sbx_new', sandbox, 'memory', [stale, tiny, full], 0, STALE)).toContain('(it needs 128 MiB of memory; the live worker has 72 MiB of memory free)');
  });

  it('counts room the same pass gave to work queued before it as taken', () => {
    const w = worker('w1', { capacity: { slots: 10, memoryMiB: 300, cpus: 2, diskMiB: 4096, cpuOversubscription: 64 }, inFlight: held(1) });
    const after = withPlaced([w], [{ request: { runId: 'sbx_ahead', memoryMiB: 128, cpus: 1, diskMiB: 64 }, worker: { workerId: 'w1' } }]);
    expect(after[0]!.inFlight.map((r) => r.runId)).toEqual(['sbx_0', 'sbx_ahead']);
    expect(withPlaced(after, [{ request: { runId: 'sbx_ahead', memoryMiB: 128, cpus: 1, diskMiB: 64 }, worker: { workerId: 'w1' } }])[0]!.inFlight).toHaveLength(2);
    expect(fullMessage('sbx_new', sandbox, 'memory', after, 0, STALE)).toContain('the live worker has 44 MiB of memory free');
  });

  it('says how large the largest live worker is in all when it could never fit', () => {
    const w = worker('w1', { capacity: { slots: 10, memoryMiB: 2048, cpus: 2, diskMiB: 4096 }, inFlight: held(3) });
    expect(neverMessage('sbx_big', { ...sandbox, memoryMiB: 4096 }, 'memory', [w], 0, STALE)).toBe(
      'no worker can ever hold sbx_big: it needs 4096 MiB of memory, and the largest live worker has 2048 MiB of memory in all',
    );
  });

  it('words each dimension with its unit', () => {
    expect([capacityAmount('slots', 1), capacityAmount('slots', 0), capacityAmount('pids', 1), capacityAmount('pids', 64), capacityAmount('disk', 64), capacityAmount('cpu', 0.333_333)]).toEqual([
      '1 slot',
      '0 slots',
      '1 process',
      '64 processes',
      '64 MiB of disk',
      '0.333 CPU',
    ]);
  });
});
