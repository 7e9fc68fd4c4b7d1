import { CairnError, GENESIS_HASH } from '@cairn/contracts';
import type { Receipt } from '@cairn/contracts';
import { sealReceipt } from '@cairn/evidence';
import type { Cairn } from '@cairn/sdk';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { Output } from '../output.js';
import { followRun, StepEcho } from './follow-run.js';

const RUN = 'run_follow1';
const SHA = (c: string) => c.repeat(64);
const CAPS = { wall_seconds: 60, memory_mib: 64, pids: 16, disk_mib: 32, cpus: 0.5 };

/** A run whose attempt 1 ran step 0 on w-b and was lost; attempt 2 ran it again on w-a (ADR 0035). Unsealed. */
function twoAttempts(): Receipt[] {
  const receipts: Receipt[] = [];
  let head = GENESIS_HASH;
  const add = (type: string, actor: string, fields: Record<string, unknown>) => {
    const seq = receipts.length + 1;
    const body = { v: 1, seq, run_id: RUN, tenant: 'acme', type, actor, ts: new Date(Date.UTC(2026, 11, 4, 0, 0, seq)).toISOString(), causation: seq === 1 ? null : `${RUN}:${seq - 1}`, ...fields };
    const sealed = sealReceipt(head, body) as unknown as Receipt;
    head = sealed.hash;
    receipts.push(sealed);
  };
  const attempt = (n: number, worker: string, stdout: string) => {
    add('run.scheduled', 'scheduler', { worker_id: worker, lease_id: `${RUN}:${n}`, lease_expires_at: '2026-12-04T00:10:00.000Z', attempt: n });
    add('sandbox.created', 'runtime', { container_name: `cairn-${RUN}-${n}`, worker_id: worker, driver: 'docker', image: 'cairn/sandbox-busybox:1', image_digest: null, caps: CAPS, network: 'none' });
    add('step.started', 'runtime', { step_index: 0, stage: 'step', tool: 'echo', argv: ['echo', 'hi'], workdir: '/work', env_names: [] });
    add('step.completed', 'runtime', {
      step_index: 0, stage: 'step', tool: 'echo', argv: ['echo', 'hi'], exit_code: 0, signal: null,
      stdout_sha256: SHA(stdout), stderr_sha256: SHA('e'), stdout_bytes: 3, stderr_bytes: 0, output_truncated: false,
      duration_ms: 5, limits_hit: [], redactions: [], artifact_hashes: {},
    });
  };
  add('run.submitted', 'intake', { spec: { name: 'retried', steps: [{ argv: ['echo', 'hi'] }], retries: 1 }, spec_sha256: SHA('a'), submitted_by: 'key:k1', idempotency_key_sha256: SHA('b') });
  add('policy.decided', 'policy', { decision: 'allow', policy_version: SHA('c'), reasons: [], caps: CAPS, image: 'cairn/sandbox-busybox:1' });
  attempt(1, 'w-b', '1');
  add('run.retried', 'scheduler', { attempt: 1, error_code: 'E_WORKER_LOST', worker_id: 'w-b', lease_id: `${RUN}:1`, message: 'worker w-b lost', retries_left: 0 });
  attempt(2, 'w-a', '2');
  return receipts;
}

/** A client that streams `receipts` and serves each step output as the gateway would: the bytes of the attempt asked for. */
function clientOf(receipts: Receipt[]) {
  const reads: { step: number; stream: string; attempt: number | undefined }[] = [];
  const client = {
    runs: {
      async *follow() {
        for (const receipt of receipts) yield await Promise.resolve(receipt);
      },
      output(_id: string, step: number, stream: 'stdout' | 'stderr', options: { attempt?: number; expectedSha256?: string }) {
        reads.push({ step, stream, attempt: options.attempt });
        // The gateway's answer: the current attempt's (2) unless another is asked for.
        const served = stream === 'stderr' ? SHA('e') : SHA(String(options.attempt ?? 2));
        if (options.expectedSha256 !== undefined && options.expectedSha256 !== served) return Promise.reject(new CairnError('E_INTERNAL', 'sha256 mismatch'));
        return Promise.resolve({ bytes: new Uint8Array(0), sha256: served });
      },
    },
  } as unknown as Cairn;
  return { client, reads };
}

describe('cairn run --wait following a retried run from its start (ADR 0035)', () => {
  it('given a step completed in the lost attempt and again in the next, when each is shown, then each is read from its own attempt and none mismatches', async () => {
    const { client, reads } = clientOf(twoAttempts());
    const streams = { stdout: new PassThrough(), stderr: new PassThrough(), env: {} };
    const output = new Output(streams, false);
    const echo = new StepEcho(client, streams, output);
    await expect(followRun(client, RUN, output, null, echo)).rejects.toMatchObject({ code: 'E_INTERNAL', message: expect.stringContaining('ended before run.sealed') as string });
    expect(reads).toEqual([
      { step: 0, stream: 'stdout', attempt: 1 },
      { step: 0, stream: 'stderr', attempt: 1 },
      { step: 0, stream: 'stdout', attempt: 2 },
      { step: 0, stream: 'stderr', attempt: 2 },
    ]);
    expect(echo.mismatched).toBe(false);
  });
});
