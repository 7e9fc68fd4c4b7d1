import { describe, expect, it } from 'vitest';
import { bucketStreamName, isolatedStackStreams } from './kv-bucket.js';

describe('isolatedStackStreams', () => {
  it('names every stream an isolated stack makes: evidence, commands, the workers, drains, leases, approvals and placement queue buckets, the artifact object store, the secret catalog, the log of seal heads and its checkpoints', () => {
    expect(isolatedStackStreams('e2e-7')).toEqual([
      'CAIRN_EVIDENCE_E2E_7',
      'CAIRN_COMMANDS_E2E_7',
      'KV_cairn_workers_e2e-7',
      'KV_cairn_workers_e2e-7_drains',
      'KV_cairn_leases_e2e-7',
      'KV_cairn_leases_e2e-7_approvals',
      'KV_cairn_leases_e2e-7_queue',
      'OBJ_cairn_artifacts_e2e-7',
      'KV_cairn_secrets_e2e-7',
      'CAIRN_EVIDENCE_E2E_7_TLOG',
      'KV_CAIRN_EVIDENCE_E2E_7_TLOG_CHECKPOINTS',
    ]);
    expect(bucketStreamName('cairn_leases_x')).toBe('KV_cairn_leases_x');
  });
});
