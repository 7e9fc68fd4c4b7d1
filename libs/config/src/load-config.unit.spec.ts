import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { EvidenceLogConfigSchema, loadConfig, TlogConfigSchema, tlogNames, tlogNamesFor } from './load-config.js';

function refusal(env: Record<string, string>): string {
  try {
    loadConfig(EvidenceLogConfigSchema, env);
  } catch (error) {
    if (isCairnError(error) && error.code === 'E_INPUT') return error.message;
    throw error;
  }
  throw new Error('accepted');
}

describe('CAIRN_NATS_REPLICAS', () => {
  it('is 1 when unset, and 1, 3 or 5 when set', () => {
    expect(loadConfig(EvidenceLogConfigSchema, {}).CAIRN_NATS_REPLICAS).toBe(1);
    for (const n of [1, 3, 5]) expect(loadConfig(EvidenceLogConfigSchema, { CAIRN_NATS_REPLICAS: String(n) }).CAIRN_NATS_REPLICAS).toBe(n);
  });

  it('refuses at boot, naming the variable, an even count, zero, more than five, or not a number', () => {
    for (const bad of ['0', '2', '4', '6', '7', '-1', '1.5', 'three']) {
      expect(refusal({ CAIRN_NATS_REPLICAS: bad }), bad).toMatch(/^invalid configuration: CAIRN_NATS_REPLICAS: /);
    }
    expect(refusal({ CAIRN_NATS_REPLICAS: '2' })).toContain('1 (one node), 3 or 5');
  });

  it('takes a cluster as comma-separated servers in CAIRN_NATS_URL', () => {
    const servers = 'nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224';
    expect(loadConfig(EvidenceLogConfigSchema, { CAIRN_NATS_URL: servers, CAIRN_NATS_REPLICAS: '3' })).toMatchObject({ CAIRN_NATS_URL: servers, CAIRN_NATS_REPLICAS: 3 });
  });
});

describe('tlogNames', () => {
  it('derives the log of seal heads from the evidence stream, lets each variable win, and keeps names within 64', () => {
    const base = loadConfig(EvidenceLogConfigSchema.extend(TlogConfigSchema.shape), {});
    expect(tlogNames(base)).toEqual({ stream: 'CAIRN_EVIDENCE_TLOG', subjectPrefix: 'cairn.evidence_tlog', checkpointBucket: 'CAIRN_EVIDENCE_TLOG_CHECKPOINTS' });
    expect(tlogNames({ ...base, CAIRN_TLOG_STREAM: 'MINE' }).stream).toBe('MINE');
    const long = tlogNamesFor(`CAIRN_EVIDENCE_${'X'.repeat(40)}`, 'cairn.x.evidence');
    expect(long.checkpointBucket.length).toBeLessThanOrEqual(64);
    expect(long.checkpointBucket).not.toBe(tlogNamesFor(`CAIRN_EVIDENCE_${'X'.repeat(39)}Y`, 'p').checkpointBucket);
    expect(() => tlogNames({ ...base, CAIRN_TLOG_SUBJECT_PREFIX: 'cairn.evidence.tlog' })).toThrow(/under CAIRN_EVIDENCE_SUBJECT_PREFIX/);
  });
});
