import { describe, expect, it } from 'vitest';
import { isolatedNames } from './stack-names.js';

describe('isolatedNames', () => {
  it('gives an isolated stack its own streams, subjects, buckets and worker id', () => {
    expect(isolatedNames('e2e-7')).toEqual({
      CAIRN_EVIDENCE_STREAM: 'CAIRN_EVIDENCE_E2E_7',
      CAIRN_EVIDENCE_SUBJECT_PREFIX: 'cairn.e2e-7.evidence',
      CAIRN_COMMAND_STREAM: 'CAIRN_COMMANDS_E2E_7',
      CAIRN_COMMAND_SUBJECT_PREFIX: 'cairn.e2e-7',
      CAIRN_WORKERS_BUCKET: 'cairn_workers_e2e-7',
      CAIRN_LEASES_BUCKET: 'cairn_leases_e2e-7',
      CAIRN_ARTIFACT_BUCKET: 'cairn_artifacts_e2e-7',
      CAIRN_SECRETS_BUCKET: 'cairn_secrets_e2e-7',
      CAIRN_WORKER_ID: 'local-e2e-7',
    });
  });
});
