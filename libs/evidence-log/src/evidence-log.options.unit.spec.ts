import { isCairnError } from '@cairn/contracts';
import { EvidenceLogConfigSchema, loadConfig } from '@cairn/config';
import { describe, expect, it } from 'vitest';
import { evidenceLogOptionsFromConfig, resolveEvidenceLogOptions } from './evidence-log.options.js';
import type { EvidenceLogOptions } from './evidence-log.options.js';

const valid: EvidenceLogOptions = { servers: 'nats://127.0.0.1:4222', stream: 'CAIRN_EVIDENCE', subjectPrefix: 'cairn.evidence' };

describe('resolveEvidenceLogOptions', () => {
  it('fills the defaults', () => {
    expect(resolveEvidenceLogOptions(valid)).toEqual({
      ...valid,
      duplicateWindowMs: 600_000,
      replicas: 1,
      name: 'cairn-evidence-log',
      maxAttempts: 32,
      headCacheSize: 10_000,
      publishTimeoutMs: 5_000,
      appends: null,
      credsFile: null,
    });
  });

  it.each<[string, Partial<EvidenceLogOptions>]>([
    ['stream', { stream: 'has.dot' }],
    ['subjectPrefix', { subjectPrefix: 'cairn.*' }],
    ['subjectPrefix', { subjectPrefix: 'Cairn.Evidence' }],
    ['subjectPrefix', { subjectPrefix: 'cairn.evidence.' }],
    ['replicas', { replicas: 7 }],
    ['duplicateWindowMs', { duplicateWindowMs: 10 }],
    ['maxAttempts', { maxAttempts: 0 }],
    ['servers', { servers: ' ' }],
  ])('refuses a bad %s (E_INPUT, naming it)', (field, overrides) => {
    let caught: unknown;
    try {
      resolveEvidenceLogOptions({ ...valid, ...overrides });
    } catch (error) {
      caught = error;
    }
    expect(isCairnError(caught) && caught.code).toBe('E_INPUT');
    expect(String((caught as Error).message)).toContain(field);
  });
});

describe('evidenceLogOptionsFromConfig', () => {
  it('takes the replicas from CAIRN_NATS_REPLICAS (1 when unset)', () => {
    expect(evidenceLogOptionsFromConfig(loadConfig(EvidenceLogConfigSchema, {})).replicas).toBe(1);
    expect(evidenceLogOptionsFromConfig(loadConfig(EvidenceLogConfigSchema, { CAIRN_NATS_REPLICAS: '3' })).replicas).toBe(3);
  });

  it('maps the validated configuration, defaults included', () => {
    const config = loadConfig(EvidenceLogConfigSchema, { CAIRN_EVIDENCE_STREAM: 'EV_TEST' });
    expect(evidenceLogOptionsFromConfig(config, { replicas: 3 })).toEqual({
      servers: 'nats://127.0.0.1:4222',
      stream: 'EV_TEST',
      subjectPrefix: 'cairn.evidence',
      replicas: 3,
    });
  });
});
