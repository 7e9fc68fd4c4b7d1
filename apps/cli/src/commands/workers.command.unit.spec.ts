import type { Worker } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { ago, workersTable } from './workers.command.js';

const NOW = Date.parse('2026-12-02T12:00:00.000Z');

function worker(workerId: string, overrides: Partial<Worker> = {}): Worker {
  return {
    workerId,
    status: 'eligible',
    healthy: true,
    draining: false,
    drain: null,
    slots: 4,
    inFlight: 2,
    runs: 1,
    sandboxes: 1,
    capacity: { slots: 4, memoryMiB: 8192, cpus: 2, diskMiB: 4096, pids: 1024, cpuOversubscription: 2 },
    reserved: { slots: 2, memoryMiB: 1536, cpus: 1.5, diskMiB: 512, pids: 256 },
    lastHeartbeatAt: new Date(NOW - 3000).toISOString(),
    images: { 'cairn/sandbox-busybox:1': `sha256:${'a'.repeat(64)}`, 'cairn/sandbox-debian:1': `sha256:${'b'.repeat(64)}` },
    ...overrides,
  };
}

describe('cairn workers', () => {
  it('shows each worker with its status, what it holds of its capacity, its runs and sandboxes, images and heartbeat', () => {
    const table = workersTable(
      [worker('w-a'), worker('w-b', { status: 'draining', draining: true, drain: { since: '2026-12-02T11:59:00.000Z', by: 'key:k1' }, runs: 0, sandboxes: 0, inFlight: 0, lastHeartbeatAt: new Date(NOW - 600_000).toISOString(), reserved: { slots: 0, memoryMiB: 0, cpus: 0, diskMiB: 0, pids: 0 } })],
      NOW,
    );
    const [header, a, b] = table.split('\n');
    expect(header).toMatch(/^WORKER\s+STATUS\s+SLOTS\s+MEMORY MiB\s+CPU\s+DISK MiB\s+PIDS\s+RUNS\s+SANDBOXES\s+IMAGES\s+HEARTBEAT$/);
    expect(a!.split(/\s{2,}/)).toEqual(['w-a', 'eligible', '2/4', '1536/8192', '1.5/4', '512/4096', '256/1024', '1', '1', '2', '3s ago']);
    expect(b!.split(/\s{2,}/)).toEqual(['w-b', 'draining', '0/4', '0/8192', '0/4', '0/4096', '0/1024', '0', '0', '2', '10m ago']);
  });

  it('names a drain an unhealthy or stale worker carries, and says when there are none', () => {
    const stale = worker('w-c', { status: 'stale', healthy: false, draining: true, drain: { since: '2026-12-02T11:00:00.000Z', by: 'key:k1' } });
    expect(workersTable([stale], NOW).split('\n')[1]).toContain('stale (drained)');
    expect(workersTable([], NOW)).toBe('no workers registered');
  });

  it('says how long ago a heartbeat was, never a negative time', () => {
    expect(ago(new Date(NOW + 5000).toISOString(), NOW)).toBe('now');
    expect(ago(new Date(NOW - 59_000).toISOString(), NOW)).toBe('59s ago');
    expect(ago(new Date(NOW - 3 * 3600_000).toISOString(), NOW)).toBe('3h ago');
  });
});
