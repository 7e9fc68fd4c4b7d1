import { GENESIS_HASH, parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt, EvidenceReceiptOf } from '@cairn/contracts';
import { sealReceipt } from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import { approvalGranted, assessScheduled, decideEnding, lastPlacementOn, parseChain, secretsAllowedBy, stopCauseOf, unknownStateEnding } from './run-assessment.js';

const RUN = 'run_assess1';
const SHA = (c: string) => c.repeat(64);
const IMAGE_ID = `sha256:${'d'.repeat(64)}`;
const CAPS = { wall_seconds: 60, memory_mib: 64, pids: 32, disk_mib: 16, cpus: 1 };

/** A well-linked chain, each receipt checked against its contract as it is added. */
class Chain {
  readonly receipts: EvidenceReceipt[] = [];
  private head = GENESIS_HASH;

  add(type: string, fields: Record<string, unknown>, actor = 'intake'): EvidenceReceipt {
    const seq = this.receipts.length + 1;
    const body = { v: 1, seq, run_id: RUN, tenant: 'acme', type, actor, ts: `2026-11-30T00:00:0${seq % 10}.000Z`, causation: null, ...fields };
    const sealed = sealReceipt(this.head, body);
    const parsed = parseEvidenceReceipt(sealed);
    if (!parsed.ok) throw new Error(parsed.message);
    this.head = sealed.hash;
    this.receipts.push(parsed.receipt);
    return parsed.receipt;
  }

  submitted(spec: Record<string, unknown> = {}): this {
    this.add('run.submitted', {
      spec: { name: 'unit', steps: [{ argv: ['sh', '-c', 'echo hi'] }], ...spec },
      spec_sha256: SHA('a'),
      submitted_by: 'key:k1',
      idempotency_key_sha256: SHA('b'),
    });
    return this;
  }

  allowed(image = `cairn/sandbox-busybox:1@${IMAGE_ID}`, decision: 'allow' | 'deny' = 'allow'): this {
    const fields = decision === 'allow' ? { caps: CAPS, image } : { error_code: 'E_POLICY_DENIED' };
    this.add('policy.decided', { decision, policy_version: SHA('c'), reasons: [], ...fields }, 'policy');
    return this;
  }

  scheduled(worker = 'w1', attempt = 1): EvidenceReceiptOf<'run.scheduled'> {
    const receipt = this.add('run.scheduled', { worker_id: worker, lease_id: `lease-${attempt}`, lease_expires_at: '2026-11-30T00:10:00.000Z', attempt }, 'scheduler');
    return receipt as EvidenceReceiptOf<'run.scheduled'>;
  }

  created(): this {
    this.add(
      'sandbox.created',
      { container_name: `cairn-${RUN}-1`, worker_id: 'w1', driver: 'docker', image: 'cairn/sandbox-busybox:1', image_digest: IMAGE_ID, caps: CAPS, network: 'none' },
      'runtime',
    );
    return this;
  }
}

describe('assessScheduled', () => {
  it('plans a run placed on this worker from its spec and policy’s grant', () => {
    const chain = new Chain().submitted({
      steps: [{ argv: ['sh', '-c', 'echo hi'], env: { K: 'v' } }, { argv: ['/bin/cat', 'in.txt'], timeoutSeconds: 5 }],
      files: [
        { path: '/work/in.txt', content: 'hello' },
        { path: '/work/bin.dat', content: 'AAEC', encoding: 'base64', mode: 0o755 },
      ],
      outputs: ['/out'],
    });
    const scheduled = chain.allowed().scheduled();
    const assessment = assessScheduled(chain.receipts, scheduled, 'w1');
    expect(assessment.kind).toBe('execute');
    if (assessment.kind !== 'execute') return;
    expect(assessment.plan).toMatchObject({
      runId: RUN,
      image: 'cairn/sandbox-busybox:1',
      imageDigest: IMAGE_ID,
      caps: CAPS,
      outputs: ['/out'],
    });
    expect(assessment.plan.steps.map((s) => [s.tool, s.timeoutMs, s.envNames])).toEqual([
      ['sh', 60_000, ['K']],
      ['cat', 5000, []],
    ]);
    expect(assessment.plan.files).toEqual([
      { path: '/work/in.txt', content: new Uint8Array(Buffer.from('hello')) },
      { path: '/work/bin.dat', content: new Uint8Array([0, 1, 2]), mode: 0o755 },
    ]);
  });

  it('takes an image granted without a digest as it is', () => {
    const chain = new Chain().submitted();
    const scheduled = chain.allowed('cairn/sandbox-busybox:1').scheduled();
    const assessment = assessScheduled(chain.receipts, scheduled, 'w1');
    expect(assessment.kind === 'execute' && [assessment.plan.image, assessment.plan.imageDigest]).toEqual(['cairn/sandbox-busybox:1', null]);
  });

  it('ignores a placement on another worker', () => {
    const chain = new Chain().submitted().allowed();
    expect(assessScheduled(chain.receipts, chain.scheduled('w2'), 'w1')).toEqual({ kind: 'ignore', reason: 'placed on worker w2' });
  });

  it('ignores a run that has ended, and one placed again since', () => {
    const ended = new Chain().submitted().allowed();
    const first = ended.scheduled();
    ended.add('run.cancelled', { cancelled_by: 'key:k1' });
    expect(assessScheduled(ended.receipts, first, 'w1')).toMatchObject({ kind: 'ignore', reason: 'the run has ended (CANCELLED)' });

    const again = new Chain().submitted().allowed();
    const old = again.scheduled('w1', 1);
    again.scheduled('w1', 2);
    expect(assessScheduled(again.receipts, old, 'w1')).toMatchObject({ kind: 'ignore', reason: 'a later placement superseded this one' });
  });

  it('finds a run lost after its sandbox was created (a redelivery, a restart) — never runs it again', () => {
    const chain = new Chain().submitted().allowed();
    const scheduled = chain.scheduled();
    chain.created();
    chain.add('step.started', { step_index: 0, stage: 'step', tool: 'sh', argv: ['sh'], workdir: '/work', env_names: [] }, 'runtime');
    expect(assessScheduled(chain.receipts, scheduled, 'w1')).toEqual({ kind: 'lost', containerName: `cairn-${RUN}-1`, teardownRecorded: false });
    chain.add('sandbox.destroyed', { container_name: `cairn-${RUN}-1`, verified_gone: true, reason: 'completed' }, 'runtime');
    expect(assessScheduled(chain.receipts, scheduled, 'w1')).toEqual({ kind: 'lost', containerName: `cairn-${RUN}-1`, teardownRecorded: true });
  });

  it('given a run retried once (ADR 0035), when its second placement is assessed, then it is planned as a first one; the lost placement is ignored, before and after the next', () => {
    const chain = new Chain().submitted({ steps: [{ argv: ['sh', '-c', 'echo a'] }, { argv: ['sh', '-c', 'echo b'] }] }).allowed();
    const lost = chain.scheduled('w0', 1);
    chain.add('sandbox.created', { container_name: `cairn-${RUN}-a1`, worker_id: 'w0', driver: 'docker', image: 'cairn/sandbox-busybox:1', image_digest: IMAGE_ID, caps: CAPS, network: 'none' }, 'runtime');
    chain.add('step.started', { step_index: 0, stage: 'step', tool: 'sh', argv: ['sh'], workdir: '/work', env_names: [] }, 'runtime');
    chain.add('run.retried', { attempt: 1, error_code: 'E_WORKER_LOST', worker_id: 'w0', lease_id: 'lease-1', message: 'worker w0 lost', retries_left: 0 }, 'scheduler');
    expect(assessScheduled(chain.receipts, lost, 'w0')).toEqual({ kind: 'ignore', reason: 'this attempt was lost and retried' });
    const next = chain.scheduled('w1', 2);
    const assessment = assessScheduled(chain.receipts, next, 'w1');
    expect(assessment.kind).toBe('execute');
    if (assessment.kind !== 'execute') return;
    expect(assessment.plan.steps.map((s) => s.argv)).toEqual([
      ['sh', '-c', 'echo a'],
      ['sh', '-c', 'echo b'],
    ]);
    expect(assessment.plan.caps).toEqual(CAPS);
    expect(assessScheduled(chain.receipts, lost, 'w0')).toMatchObject({ kind: 'ignore', reason: 'a later placement superseded this one' });
  });

  it('given a step approval granted in a lost attempt, when the next attempt holds the step, then it is not granted there (an approval is for one execution)', () => {
    const chain = new Chain().submitted().allowed();
    chain.scheduled('w0', 1);
    chain.created();
    chain.add('approval.requested', { approval_id: 'step-0', scope: 'step', step_index: 0, reason: 'apply', expires_at: '2026-12-01T00:00:00.000Z' }, 'runtime');
    chain.add('approval.granted', { approval_id: 'step-0', approved_by: 'key:admin' }, 'intake');
    expect(approvalGranted(chain.receipts, 'step-0')).toBe(true);
    chain.add('run.retried', { attempt: 1, error_code: 'E_WORKER_LOST', worker_id: 'w0', lease_id: 'lease-1', message: 'worker w0 lost', retries_left: 0 }, 'scheduler');
    chain.scheduled('w1', 2);
    expect(approvalGranted(chain.receipts, 'step-0')).toBe(false);
  });

  it('ignores a run already executed', () => {
    const chain = new Chain().submitted().allowed();
    const scheduled = chain.scheduled();
    chain.created();
    chain.add('run.executed', { steps_completed: 1, exit_codes: [0], artifact_hashes: {}, duration_ms: 5 }, 'runtime');
    expect(assessScheduled(chain.receipts, scheduled, 'w1')).toMatchObject({ kind: 'ignore', reason: 'the run was executed' });
  });

  it('refuses, before any sandbox, what this worker cannot honour', () => {
    // Egress that policy did not grant on the record is never guessed from the spec.
    const egress = new Chain().submitted({ network: { egress: ['example.com:443'] } });
    expect(assessScheduled(egress.receipts, egress.allowed().scheduled(), 'w1')).toMatchObject({ kind: 'refuse', code: 'E_UNKNOWN_STATE' });

    const slow = new Chain().submitted({ steps: [{ argv: ['a'] }, { argv: ['b'], timeoutSeconds: 61 }] });
    expect(assessScheduled(slow.receipts, slow.allowed().scheduled(), 'w1')).toMatchObject({ kind: 'refuse', code: 'E_POLICY_DENIED', stepIndex: 1 });
  });

  it('plans the egress policy granted, and no network for a run that asked for none', () => {
    const granted = new Chain().submitted({ network: { egress: ['sink.test:8080'] } });
    const network = { egress: ['sink.test:8080'], allow_private: true };
    granted.add('policy.decided', { decision: 'allow', policy_version: SHA('c'), reasons: [], caps: CAPS, image: `cairn/sandbox-busybox:1@${IMAGE_ID}`, network }, 'policy');
    const assessment = assessScheduled(granted.receipts, granted.scheduled(), 'w1');
    expect(assessment.kind === 'execute' && assessment.plan.network).toEqual({ egress: ['sink.test:8080'], allowPrivate: true });

    const none = new Chain().submitted({ network: 'none' });
    const plain = assessScheduled(none.receipts, none.allowed().scheduled(), 'w1');
    expect(plain.kind === 'execute' && plain.plan.network).toBe('none');
  });

  it('plans the secrets the run lists and its decision allowed, by name only (their values are read when it starts)', () => {
    const secrets = new Chain().submitted({ secrets: ['API_TOKEN', 'DB_PASSWORD'] });
    const decided = { decision: 'allow', policy_version: SHA('c'), reasons: [], caps: CAPS, image: `cairn/sandbox-busybox:1@${IMAGE_ID}` } as const;
    secrets.add('policy.decided', { ...decided, secrets: ['API_TOKEN', 'DB_PASSWORD'] }, 'policy');
    const assessment = assessScheduled(secrets.receipts, secrets.scheduled(), 'w1');
    expect(assessment.kind === 'execute' && assessment.plan.secrets).toEqual(['API_TOKEN', 'DB_PASSWORD']);
    const none = new Chain().submitted();
    const plain = assessScheduled(none.receipts, none.allowed().scheduled(), 'w1');
    expect(plain.kind === 'execute' && plain.plan.secrets).toEqual([]);
  });

  it('refuses E_POLICY_DENIED a run listing a secret its decision does not name (or a decision from before decisions named them): no value is read', () => {
    const decided = { decision: 'allow', policy_version: SHA('c'), reasons: [], caps: CAPS, image: `cairn/sandbox-busybox:1@${IMAGE_ID}` } as const;
    const partly = new Chain().submitted({ secrets: ['API_TOKEN', 'DB_PASSWORD'] });
    partly.add('policy.decided', { ...decided, secrets: ['API_TOKEN'] }, 'policy');
    const refused = assessScheduled(partly.receipts, partly.scheduled(), 'w1');
    expect(refused).toMatchObject({ kind: 'refuse', code: 'E_POLICY_DENIED' });
    expect(refused.kind === 'refuse' && refused.message).toContain('DB_PASSWORD not allowed');
    const older = new Chain().submitted({ secrets: ['API_TOKEN'] });
    older.add('policy.decided', decided, 'policy');
    expect(assessScheduled(older.receipts, older.scheduled(), 'w1')).toMatchObject({ kind: 'refuse', code: 'E_POLICY_DENIED' });
  });

  it('secretsAllowedBy: the listed names when the decision names each; else the names it does not', () => {
    expect(secretsAllowedBy(['A', 'B'], { secrets: ['B', 'A', 'C'] })).toEqual({ ok: true, names: ['A', 'B'] });
    expect(secretsAllowedBy([], {})).toEqual({ ok: true, names: [] });
    expect(secretsAllowedBy(['A', 'B'], { secrets: ['A'] })).toEqual({ ok: false, message: "secrets: B not allowed by the run's policy decision, so not opened" });
    expect(secretsAllowedBy(['A'], {})).toMatchObject({ ok: false });
  });

  it('refuses a placement without a grant to run (fails closed, I-5)', () => {
    const chain = new Chain().submitted();
    chain.add('policy.decided', { decision: 'allow', policy_version: SHA('c'), reasons: [] }, 'policy');
    expect(assessScheduled(chain.receipts, chain.scheduled(), 'w1')).toMatchObject({ kind: 'refuse', code: 'E_UNKNOWN_STATE', message: 'the policy decision names no caps or no image' });
  });
});

describe('lastPlacementOn', () => {
  it('is the latest placement on the worker, or null', () => {
    const chain = new Chain().submitted().allowed();
    chain.scheduled('w1', 1);
    const second = chain.scheduled('w1', 2);
    expect(lastPlacementOn(chain.receipts, 'w1')).toBe(second);
    expect(lastPlacementOn(chain.receipts, 'w9')).toBeNull();
  });
});

describe('parseChain', () => {
  it('parses stored receipts, and names the first one that breaks its contract', () => {
    const chain = new Chain().submitted().allowed();
    const raw: Record<string, unknown>[] = chain.receipts.map((r) => ({ ...r }));
    expect(parseChain(raw)).toEqual({ ok: true, receipts: chain.receipts });
    raw[1] = { ...raw[1], decision: 'maybe' };
    expect(parseChain(raw)).toMatchObject({ ok: false, seq: 2 });
  });
});

describe('unknownStateEnding: a chain holding a receipt that breaks its contract (I-5)', () => {
  const chain = () => new Chain().submitted().allowed();

  it('given an unknown event type, then fail the run E_UNKNOWN_STATE naming its seq', () => {
    const raw: Record<string, unknown>[] = chain().receipts.map((r) => ({ ...r }));
    raw.push({ ...raw[1], seq: 3, type: 'run.teleported' });
    const ending = unknownStateEnding(raw);
    expect(ending.kind).toBe('failed');
    expect(ending.kind === 'failed' ? ending.message : '').toMatch(/seq 3/);
  });

  it('given a known type whose fields break its contract, then the same', () => {
    const raw: Record<string, unknown>[] = chain().receipts.map((r) => ({ ...r }));
    raw[1] = { ...raw[1], decision: 'maybe' };
    expect(unknownStateEnding(raw)).toMatchObject({ kind: 'failed', message: expect.stringContaining('seq 2') as string });
  });

  it('given a run a valid receipt already ended, or a chain that is all valid, then nothing', () => {
    const ended = chain();
    ended.add('run.failed', { error_code: 'E_WORKER_LOST', message: 'lost' }, 'scheduler');
    const raw: Record<string, unknown>[] = ended.receipts.map((r) => ({ ...r }));
    raw.push({ ...raw[1], seq: 4, type: 'run.teleported' });
    expect(unknownStateEnding(raw)).toMatchObject({ kind: 'none' });
    expect(unknownStateEnding(chain().receipts)).toMatchObject({ kind: 'none' });
  });
});

describe('stopCauseOf: a running run, and what the chain says now', () => {
  const running = () => {
    const chain = new Chain().submitted().allowed();
    chain.scheduled();
    chain.created();
    chain.add('step.started', { step_index: 0, stage: 'step', tool: 'sh', argv: ['sh'], workdir: '/work', env_names: [] }, 'runtime');
    return chain;
  };

  it('given nothing new, then go on', () => {
    expect(stopCauseOf(running().receipts)).toBeNull();
  });

  it('given a cancel requested, then stop: cancelled', () => {
    const chain = running();
    chain.add('run.cancel_requested', { requested_by: 'key:k1' });
    expect(stopCauseOf(chain.receipts)).toEqual({ kind: 'cancelled' });
  });

  it('given the run failed or cancelled by someone else, then stop: ended / cancelled', () => {
    const failed = running();
    failed.add('run.failed', { error_code: 'E_WORKER_LOST', message: 'lease expired' }, 'scheduler');
    expect(stopCauseOf(failed.receipts)).toEqual({ kind: 'ended', state: 'FAILED' });
    const cancelled = running();
    cancelled.add('run.cancelled', { cancelled_by: 'key:k1', error_code: 'E_WORKER_LOST' }, 'scheduler');
    expect(stopCauseOf(cancelled.receipts)).toEqual({ kind: 'cancelled' });
  });
});

describe('a cancel and a retried attempt (ADR 0035)', () => {
  const retry = (chain: Chain) =>
    chain.add('run.retried', { attempt: 1, error_code: 'E_WORKER_LOST', worker_id: 'w-b', lease_id: 'lease-1', message: 'worker w-b lost', retries_left: 0 }, 'scheduler');
  /** Attempt 1 on w-b, its sandbox up; a cancel asked `when` (during attempt 1, or while the run waits for attempt 2); attempt 2 on w1, its sandbox up. */
  const cancelledAcross = (when: 'during attempt 1' | 'in the queue') => {
    const chain = new Chain().submitted({ retries: 1 }).allowed();
    chain.scheduled('w-b', 1);
    chain.created();
    let request: EvidenceReceipt;
    if (when === 'during attempt 1') {
      request = chain.add('run.cancel_requested', { requested_by: 'key:k1', reason: 'stop it' });
      retry(chain);
    } else {
      retry(chain);
      request = chain.add('run.cancel_requested', { requested_by: 'key:k1', reason: 'stop it' });
    }
    const placement = chain.scheduled('w1', 2);
    return { chain, request, placement };
  };

  it.each(['during attempt 1', 'in the queue'] as const)('given a cancel asked %s, when attempt 2 is about to run or has run, then it stops and answers that request: the cancel is not lost with the attempt', (when) => {
    const { chain, request, placement } = cancelledAcross(when);
    expect(lastPlacementOn(chain.receipts, 'w1')).toEqual(placement);
    expect(stopCauseOf(chain.receipts)).toEqual({ kind: 'cancelled' });
    chain.created();
    expect(stopCauseOf(chain.receipts)).toEqual({ kind: 'cancelled' });
    expect(decideEnding(chain.receipts, 'executed')).toEqual({ kind: 'cancelled', request });
    expect(decideEnding(chain.receipts, 'stopped')).toEqual({ kind: 'cancelled', request });
  });
});

describe('decideEnding: the last receipt this worker appends', () => {
  const ran = () => {
    const chain = new Chain().submitted().allowed();
    chain.scheduled();
    chain.created();
    return chain;
  };

  it('given no cancel, then run.executed or run.failed as the run went, and nothing when it merely stopped', () => {
    expect(decideEnding(ran().receipts, 'executed')).toEqual({ kind: 'executed' });
    expect(decideEnding(ran().receipts, 'failed')).toEqual({ kind: 'failed' });
    expect(decideEnding(ran().receipts, 'stopped')).toMatchObject({ kind: 'none' });
  });

  it('given a pending cancel request, then run.cancelled answering it — even when every step had finished', () => {
    const chain = ran();
    const request = chain.add('run.cancel_requested', { requested_by: 'key:k1', reason: 'stop' });
    expect(decideEnding(chain.receipts, 'stopped')).toEqual({ kind: 'cancelled', request });
    expect(decideEnding(chain.receipts, 'executed')).toEqual({ kind: 'cancelled', request });
  });

  it('given a pending cancel request, when the run failed (a cap hit), then run.failed says what happened', () => {
    const chain = ran();
    chain.add('run.cancel_requested', { requested_by: 'key:k1' });
    expect(decideEnding(chain.receipts, 'failed')).toEqual({ kind: 'failed' });
  });

  it('given a run someone else ended, then nothing more', () => {
    const chain = ran();
    chain.add('run.cancel_requested', { requested_by: 'key:k1' });
    chain.add('run.cancelled', { cancelled_by: 'key:k1', error_code: 'E_WORKER_LOST' }, 'scheduler');
    for (const outcome of ['executed', 'failed', 'stopped'] as const) expect(decideEnding(chain.receipts, outcome)).toMatchObject({ kind: 'none' });
  });
});
