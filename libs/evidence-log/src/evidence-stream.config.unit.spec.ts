import { describe, expect, it } from 'vitest';
import type { StreamConfig } from '@nats-io/jetstream';
import { resolveEvidenceLogOptions } from './evidence-log.options.js';
import {
  chainSubjects,
  evidenceLayoutProblem,
  evidenceStreamConfig,
  evidenceStreamProblems,
  evidenceSubject,
  parseEvidenceSubject,
  typeSubjects,
} from './evidence-stream.config.js';

const options = resolveEvidenceLogOptions({ servers: 'nats://127.0.0.1:4222', stream: 'EVIDENCE', subjectPrefix: 'cairn.evidence' });

/** The config as a 2.9 server reports it after creating the stream we ask for. */
function asStored(overrides: Partial<StreamConfig> = {}): Partial<StreamConfig> {
  return { ...evidenceStreamConfig(options), sealed: false, mirror_direct: false, ...overrides };
}

describe('evidenceStreamConfig', () => {
  it('asks for an append-only file stream with no limit that drops messages', () => {
    expect(evidenceStreamConfig(options)).toMatchObject({
      name: 'EVIDENCE',
      subjects: ['cairn.evidence.>'],
      storage: 'file',
      retention: 'limits',
      deny_delete: true,
      deny_purge: true,
      allow_direct: true,
      allow_rollup_hdrs: false,
      max_msgs: -1,
      max_bytes: -1,
      max_age: 0,
      max_msgs_per_subject: -1,
      max_msg_size: 1024 * 1024,
      duplicate_window: 600_000_000_000,
      num_replicas: 1,
      allow_atomic: true,
      metadata: { 'cairn.subject_layout': '2' },
    });
  });

  it('has no problem as stored, created or found', () => {
    expect(evidenceStreamProblems(asStored(), options, true)).toEqual([]);
    expect(evidenceStreamProblems(asStored(), options, false)).toEqual([]);
  });
});

describe('evidenceStreamProblems', () => {
  it.each<[string, Partial<StreamConfig>]>([
    ['max_msgs', { max_msgs: 1000 }],
    ['max_bytes', { max_bytes: 1 << 30 }],
    ['max_age', { max_age: 3_600_000_000_000 }],
    ['max_msgs_per_subject', { max_msgs_per_subject: 10 }],
    ['deny_delete', { deny_delete: false }],
    ['deny_purge', { deny_purge: false }],
    ['allow_rollup_hdrs', { allow_rollup_hdrs: true }],
    ['allow_msg_ttl', { allow_msg_ttl: true }],
    ['allow_direct', { allow_direct: false }],
    ['retention', { retention: 'workqueue' }],
    ['storage', { storage: 'memory' }],
    ['subjects', { subjects: ['other.>'] }],
    ['no_ack', { no_ack: true }],
    ['sealed', { sealed: true }],
    ['num_replicas', { num_replicas: 0 }],
    ['persist_mode', { persist_mode: 'async' }],
    ['allow_atomic', { allow_atomic: false }],
  ])('names %s when it could lose or refuse evidence', (field, overrides) => {
    const problems = evidenceStreamProblems(asStored(overrides), options, false);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(field);
  });

  it('refuses a stream whose replicas differ from CAIRN_NATS_REPLICAS, either way, naming both and how to reconcile them', () => {
    expect(evidenceStreamProblems(asStored({ num_replicas: 3 }), options, false)).toEqual([
      'num_replicas is 3, not the 1 CAIRN_NATS_REPLICAS asks for (scale it with `nats stream edit EVIDENCE --replicas 1`, or set CAIRN_NATS_REPLICAS=3)',
    ]);
    const three = resolveEvidenceLogOptions({ servers: 'nats://127.0.0.1:4222', stream: 'EVIDENCE', subjectPrefix: 'cairn.evidence', replicas: 3 });
    expect(evidenceStreamConfig(three).num_replicas).toBe(3);
    expect(evidenceStreamProblems({ ...evidenceStreamConfig(three), num_replicas: 1 }, three, false)).toEqual([
      'num_replicas is 1, not the 3 CAIRN_NATS_REPLICAS asks for (scale it with `nats stream edit EVIDENCE --replicas 3`, or set CAIRN_NATS_REPLICAS=1)',
    ]);
    expect(evidenceStreamProblems({ ...evidenceStreamConfig(three) }, three, true)).toEqual([]);
  });

  it('treats a missing deny flag (a server that dropped it) as off', () => {
    const { deny_delete: _d, ...withoutDeny } = asStored();
    expect(evidenceStreamProblems(withoutDeny, options, false).join()).toContain('deny_delete');
  });

  it('checks what the server kept only for a stream it created', () => {
    const dropped = asStored({ duplicate_window: 120_000_000_000, max_msg_size: -1 });
    expect(evidenceStreamProblems(dropped, options, false)).toEqual([]);
    const problems = evidenceStreamProblems(dropped, options, true);
    expect(problems.some((p) => p.includes('duplicate_window'))).toBe(true);
    expect(problems.some((p) => p.includes('max_msg_size'))).toBe(true);
  });
});

describe('the subject layout', () => {
  it('puts a receipt under its chain and type, and reads both back', () => {
    expect(evidenceSubject('cairn.evidence', 'run_a1', 'run.submitted')).toBe('cairn.evidence.run_a1.run.submitted');
    expect(chainSubjects('cairn.evidence', 'run_a1')).toBe('cairn.evidence.run_a1.>');
    expect(typeSubjects('cairn.evidence', 'kernel.facts')).toBe('cairn.evidence.*.kernel.facts');
    expect(parseEvidenceSubject('cairn.evidence', 'cairn.evidence.sbx_b.sandbox.exec_completed')).toEqual({ chainId: 'sbx_b', type: 'sandbox.exec_completed' });
    for (const subject of ['cairn.evidence.run_a1', 'cairn.other.run_a1.run.submitted', 'cairn.evidence.run_a1.Run.X', 'cairn.evidence..run.x']) {
      expect(parseEvidenceSubject('cairn.evidence', subject), subject).toBeNull();
    }
  });

  it('accepts a stream of this layout, refuses one of the earlier layout naming the command, and one being migrated', () => {
    expect(evidenceLayoutProblem(asStored())).toBeNull();
    const { metadata: _m, ...earlier } = asStored();
    expect(evidenceLayoutProblem(earlier)).toMatch(/earlier subject layout .*cairn log migrate/);
    expect(evidenceLayoutProblem({ ...earlier, metadata: { 'cairn.subject_layout': '3' } })).toMatch(/knows only 2/);
    expect(evidenceLayoutProblem({ ...earlier, metadata: { 'cairn.subject_layout': '2', 'cairn.migrating_from': 'EVIDENCE_LAYOUT1' } })).toMatch(
      /being filled by `cairn log migrate` from EVIDENCE_LAYOUT1/,
    );
  });
});
