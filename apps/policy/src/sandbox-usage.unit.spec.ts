import { isCairnError } from '@cairn/contracts';
import { summariseUsage } from '@cairn/policy';
import { describe, expect, it } from 'vitest';
import { sandboxUsageRecord } from './sandbox-usage.js';

const NOW = Date.parse('2026-11-30T12:00:00.000Z');
const row = (state: string, readyAt: string | null, updatedAt = '2026-11-30T11:00:00.000Z') => ({ sandbox_id: `sbx_${state.toLowerCase()}`, state, cpus: 2, memory_mib: 192, ready_at: readyAt, updated_at: updatedAt });

describe('sandboxUsageRecord', () => {
  it('counts a PENDING and a READY sandbox in flight, an ended one not', () => {
    const records = [row('PENDING', null), row('READY', '2026-11-30T11:59:00.000Z'), row('DESTROYED', '2026-11-30T10:00:00.000Z'), row('FAILED', null), row('REJECTED', null)].map(
      sandboxUsageRecord,
    );
    expect(summariseUsage(records, undefined, NOW).tenant).toMatchObject({ concurrentRuns: 2, concurrentSandboxes: 2, memoryMiB: 384 });
  });

  it('adds its CPUs × the time it was up: to now while READY, to its last receipt once ended', () => {
    const live = summariseUsage([sandboxUsageRecord(row('READY', '2026-11-30T11:59:00.000Z'))], undefined, NOW);
    expect(live.tenant.cpuSecondsToday).toBe(120);
    const ended = summariseUsage([sandboxUsageRecord(row('DESTROYED', '2026-11-30T10:00:00.000Z', '2026-11-30T10:00:30.000Z'))], undefined, NOW);
    expect(ended.tenant.cpuSecondsToday).toBe(60);
    // Never a job's run.
    expect(summariseUsage([sandboxUsageRecord(row('READY', '2026-11-30T11:59:00.000Z'))], 'nightly', NOW).jobRuns).toEqual([]);
  });

  it('refuses a state the sandbox lifecycle does not know (fail closed)', () => {
    let caught: unknown;
    try {
      sandboxUsageRecord(row('RUNNING', null));
    } catch (error) {
      caught = error;
    }
    expect(isCairnError(caught) && caught.code).toBe('E_UNKNOWN_STATE');
  });
});
