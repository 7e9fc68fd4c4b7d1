import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { formatCheck, formatDrift } from './projections.command.js';
import type { CheckSummary } from './projections.command.js';

const base: Omit<CheckSummary, 'drift' | 'driftCount'> = { lastStreamSeq: 9, events: 8, poison: 1, runs: 2, sandboxes: 0, durationMs: 40 };

describe('formatDrift', () => {
  it('says which side holds a missing or extra row, and each edited column with both values', () => {
    expect(formatDrift({ table: 'sandboxes', key: 'sbx_1', kind: 'missing', columns: ['sandbox_id'], live: null, log: { sandbox_id: 'sbx_1' } })).toBe('  sandboxes sbx_1: in the log, missing from the projections');
    expect(formatDrift({ table: 'runs', key: 'run_x', kind: 'extra', columns: ['run_id'], live: { run_id: 'run_x' }, log: null })).toBe('  runs run_x: in the projections, not in the log');
    expect(formatDrift({ table: 'runs', key: 'run_1', kind: 'edited', columns: ['score', 'state'], live: { score: 0, state: 'FAILED' }, log: { score: 3, state: 'SEALED' } })).toBe(
      '  runs run_1: edited — score: projections 0, log 3; state: projections "FAILED", log "SEALED"',
    );
  });

  it('cuts a long value (a receipt) to 120 characters', () => {
    const receipt = { argv: ['x'.repeat(500)] };
    const line = formatDrift({ table: 'evidence_events', key: '7', kind: 'edited', columns: ['receipt'], live: { receipt }, log: { receipt: {} } });
    expect(line).toMatch(/^ {2}evidence_events 7: edited — receipt: projections \{"argv":\["x+…, log \{\}$/);
    expect(line.length).toBeLessThan(200);
  });
});

describe('formatCheck', () => {
  it('is the OK line when nothing drifts', () => {
    const answer = formatCheck({ ...base, drift: [], driftCount: 0 }, 'OK');
    expect(answer).toEqual({
      human: "OK  the projections are the log's fold: 8 events, 1 poison, 2 runs, 0 sandboxes up to stream seq 9  (0.04 s)",
      machine: { ok: true, lastStreamSeq: 9, events: 8, poison: 1, runs: 2, sandboxes: 0, driftCount: 0, durationMs: 40 },
    });
  });

  it('is E_CONFLICT counting every drifting row, naming those it was given and how many more there are', () => {
    const drift = { table: 'runs', key: 'run_1', kind: 'extra' as const, columns: ['run_id'], live: { run_id: 'run_1' }, log: null };
    const answer = formatCheck({ ...base, drift: [drift], driftCount: 3 }, 'OK');
    if (!('error' in answer)) throw new Error('expected a failure');
    expect(answer.lines).toEqual(['  runs run_1: in the projections, not in the log', '  … and 2 more']);
    expect(isCairnError(answer.error) && answer.error.code).toBe('E_CONFLICT');
    expect(answer.error.message).toContain('disagree with the log in 3 rows (compared up to stream seq 9)');
    expect(answer.error.details).toEqual({ lastStreamSeq: 9, driftCount: 3, drift: [drift] });
  });
});
