import { describe, expect, it } from 'vitest';
import { evolveSandbox, foldSandbox, readSandboxChain, sandboxAwaitsSeal, sandboxFinalState } from './evolve-sandbox.js';
import { FIELDS, RunChain } from './run-chain.fixture.js';

const SHA = (c: string) => c.repeat(64);

const S = {
  requested: (extra: Record<string, unknown> = {}) => ({
    spec: { image: 'cairn/sandbox-busybox:1', ttlSeconds: 600 },
    spec_sha256: SHA('a'),
    requested_by: 'key:k1',
    expires_at: '2026-01-01T00:10:00.000Z',
    idle_seconds: 120,
    ...extra,
  }),
  allow: () => ({ ...FIELDS.policy('allow'), caps: { wall_seconds: 60, memory_mib: 256, pids: 64, disk_mib: 256, cpus: 1 }, image: 'cairn/sandbox-busybox:1@sha256:' + SHA('b') }),
  created: () => ({ ...FIELDS.sandboxCreated(), container_name: 'cairn-sbx_fixture1-1', image_digest: 'sha256:' + SHA('b') }),
  execStarted: () => ({ exec_id: 'x1', argv: ['echo', 'hi'], workdir: '/work', env_names: [] }),
  execCompleted: (error_code?: string, limits_hit: string[] = []) => {
    const { step_index: _i, stage: _s, tool: _t, artifact_hashes: _a, ...process } = FIELDS.stepCompleted(error_code === undefined ? 0 : null, error_code);
    return { ...process, limits_hit, exec_id: 'x1', argv: ['echo', 'hi'] };
  },
  written: () => ({ path: '/work/a.txt', sha256: SHA('c'), bytes: 3 }),
  read: () => ({ path: '/work/a.txt', sha256: SHA('c'), bytes: 3 }),
  expired: (cause: 'ttl' | 'idle') => ({ ttl_seconds: 600, expires_at: '2026-01-01T00:10:00.000Z', cause }),
  destroyed: (reason: string) => ({ container_name: 'cairn-sbx_fixture1-1', verified_gone: true, reason }),
};

function ready(): RunChain {
  const chain = new RunChain('sbx_fixture1');
  chain.add('sandbox.requested', S.requested());
  chain.add('policy.decided', S.allow());
  chain.add('run.scheduled', FIELDS.scheduled());
  chain.add('sandbox.created', S.created());
  return chain;
}

describe('evolveSandbox', () => {
  it('given a delete before any sandbox was created (run.cancelled, placed or not), then it is DESTROYED (deleted) and sealed SEALED; after sandbox.created the same receipt is unknown', () => {
    for (const placed of [false, true]) {
      const chain = new RunChain('sbx_fixture1');
      chain.add('sandbox.requested', S.requested());
      chain.add('policy.decided', S.allow());
      if (placed) chain.add('run.scheduled', FIELDS.scheduled());
      chain.add('run.cancelled', { cancelled_by: 'key:k1' });
      const view = foldSandbox(chain.receipts)!;
      expect(view).toMatchObject({ state: 'DESTROYED', destroyReason: 'deleted', errorCode: null });
      expect(sandboxAwaitsSeal(view)).toBe(true);
      expect(sandboxFinalState(view)).toBe('SEALED');
    }
    const created = ready();
    created.add('run.cancelled', { cancelled_by: 'key:k1' });
    expect(foldSandbox(created.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });

  it('given no worker with room (run.failed E_CAPACITY naming what ran out), then it is FAILED with that code, nothing to tear down', () => {
    const chain = new RunChain('sbx_fixture1');
    chain.add('sandbox.requested', S.requested());
    chain.add('policy.decided', S.allow());
    chain.add('run.failed', { error_code: 'E_CAPACITY', message: 'memory ran out', resource: 'memory' });
    expect(foldSandbox(chain.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_CAPACITY', destroyReason: 'failed' });
  });

  it('folds a session from request to seal: PENDING → READY → DESTROYED, counting operations', () => {
    const chain = new RunChain('sbx_fixture1');
    chain.add('sandbox.requested', S.requested());
    expect(foldSandbox(chain.receipts)).toMatchObject({ state: 'PENDING', image: 'cairn/sandbox-busybox:1', idleSeconds: 120, expiresAt: '2026-01-01T00:10:00.000Z', network: 'none' });
    chain.add('policy.decided', S.allow());
    chain.add('run.scheduled', FIELDS.scheduled());
    expect(foldSandbox(chain.receipts)).toMatchObject({ state: 'PENDING', workerId: 'w1', caps: { wall_seconds: 60 } });
    const created = chain.add('sandbox.created', S.created());
    expect(foldSandbox(chain.receipts)).toMatchObject({ state: 'READY', readyAt: created.ts, imageId: 'sha256:' + SHA('b'), operations: 0 });
    chain.add('sandbox.file.written', S.written());
    chain.add('sandbox.exec.started', S.execStarted());
    chain.add('sandbox.exec.completed', S.execCompleted());
    const read = chain.add('sandbox.file.read', S.read());
    expect(foldSandbox(chain.receipts)).toMatchObject({ state: 'READY', operations: 3, lastActivityAt: read.ts });
    chain.add('sandbox.destroyed', S.destroyed('deleted'));
    const view = foldSandbox(chain.receipts)!;
    expect(view).toMatchObject({ state: 'DESTROYED', destroyReason: 'deleted', errorCode: null, sealed: false });
    expect(sandboxAwaitsSeal(view)).toBe(true);
    expect(sandboxFinalState(view)).toBe('SEALED');
    const seal = chain.add('run.sealed', FIELDS.sealed('SEALED'));
    expect(foldSandbox(chain.receipts)).toMatchObject({ state: 'DESTROYED', sealed: true, headSeq: seal.seq, headHash: seal.hash });
  });

  it('records why it was reaped: ttl, idle, a limit, a lost worker', () => {
    for (const cause of ['ttl', 'idle'] as const) {
      const chain = ready();
      chain.add('sandbox.expired', S.expired(cause));
      expect(foldSandbox(chain.receipts)).toMatchObject({ state: 'READY', destroyReason: cause });
      chain.add('sandbox.destroyed', S.destroyed('expired'));
      expect(foldSandbox(chain.receipts)).toMatchObject({ state: 'DESTROYED', destroyReason: cause });
    }
    const limit = ready();
    limit.add('sandbox.exec.started', S.execStarted());
    limit.add('sandbox.exec.completed', S.execCompleted('E_MEM_LIMIT', ['memory']));
    limit.add('sandbox.destroyed', S.destroyed('limit'));
    expect(foldSandbox(limit.receipts)).toMatchObject({ state: 'DESTROYED', destroyReason: 'limit', errorCode: 'E_MEM_LIMIT', operations: 1 });
    // The exec's own timeout (E_TIMEOUT, no cap in limits_hit, output cut or not) leaves it READY, without an error.
    const own = ready();
    own.add('sandbox.exec.started', S.execStarted());
    own.add('sandbox.exec.completed', S.execCompleted('E_TIMEOUT', ['output_bytes']));
    expect(foldSandbox(own.receipts)).toMatchObject({ state: 'READY', errorCode: null, operations: 1 });
    const lost = ready();
    lost.add('run.failed', FIELDS.failed('E_WORKER_LOST'));
    lost.add('sandbox.destroyed', S.destroyed('worker_lost'));
    const view = foldSandbox(lost.receipts)!;
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_WORKER_LOST', destroyReason: 'worker_lost' });
    expect(sandboxFinalState(view)).toBe('FAILED');
  });

  it('a policy denial is REJECTED with its code, sealed REJECTED', () => {
    const chain = new RunChain('sbx_fixture1');
    chain.add('sandbox.requested', S.requested());
    chain.add('policy.decided', FIELDS.policy('deny', 'E_BUDGET'));
    expect(foldSandbox(chain.receipts)).toMatchObject({ state: 'REJECTED', errorCode: 'E_BUDGET' });
    chain.add('run.sealed', FIELDS.sealed('REJECTED', 'E_BUDGET'));
    expect(foldSandbox(chain.receipts)).toMatchObject({ state: 'REJECTED', sealed: true });
  });

  it('a start failure is FAILED with its code', () => {
    const chain = new RunChain('sbx_fixture1');
    chain.add('sandbox.requested', S.requested());
    chain.add('policy.decided', S.allow());
    chain.add('run.scheduled', FIELDS.scheduled());
    chain.add('run.failed', FIELDS.failed('E_SANDBOX_START'));
    expect(foldSandbox(chain.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_SANDBOX_START', destroyReason: 'failed' });
  });

  it('E_UNKNOWN_STATE: an operation before the sandbox exists, a run receipt, a hold, anything after the seal, an unknown type', () => {
    const early = new RunChain('sbx_fixture1');
    early.add('sandbox.requested', S.requested());
    early.add('sandbox.exec.started', S.execStarted());
    expect(foldSandbox(early.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });

    const runReceipt = ready();
    runReceipt.add('step.started', FIELDS.stepStarted());
    expect(foldSandbox(runReceipt.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });

    const held = new RunChain('sbx_fixture1');
    held.add('sandbox.requested', S.requested());
    held.add('policy.decided', FIELDS.policy('hold'));
    expect(foldSandbox(held.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });

    const afterSeal = ready();
    afterSeal.add('sandbox.destroyed', S.destroyed('deleted'));
    afterSeal.add('run.sealed', FIELDS.sealed('SEALED'));
    afterSeal.add('sandbox.file.read', S.read());
    expect(foldSandbox(afterSeal.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE', sealed: true });

    const wrongSeal = ready();
    wrongSeal.add('run.sealed', FIELDS.sealed('SEALED'));
    expect(foldSandbox(wrongSeal.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });

    const unknown = ready();
    unknown.add('sandbox.teleported', {});
    expect(foldSandbox(unknown.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });

    const notFirst = new RunChain('sbx_fixture1');
    notFirst.add('policy.decided', S.allow());
    expect(foldSandbox(notFirst.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });

  it('E_CHAIN_BROKEN on a gap; a redelivery changes nothing; another chain is a misuse', () => {
    const chain = ready();
    const view = foldSandbox(chain.receipts)!;
    expect(evolveSandbox(view, chain.receipts[1]!)).toBe(view);
    const gap = ready();
    gap.add('sandbox.file.read', S.read());
    gap.add('sandbox.file.read', S.read());
    expect(foldSandbox([...gap.receipts.slice(0, 4), gap.receipts[5]!])).toMatchObject({ state: 'FAILED', errorCode: 'E_CHAIN_BROKEN' });
    const other = new RunChain('sbx_other');
    other.add('sandbox.requested', S.requested());
    expect(() => evolveSandbox(view, { ...other.receipts[0]!, seq: 5 })).toThrow(/folded into the view/);
    const run = new RunChain('run_fixture1');
    run.add('run.submitted', FIELDS.submitted());
    expect(() => foldSandbox(run.receipts)).toThrow(/sandbox chains only/);
  });

  it('readSandboxChain folds a receipt that breaks its contract as unknown', () => {
    const chain = ready();
    const bad = { ...chain.receipts[3]!, container_name: 'not a name!' };
    const read = readSandboxChain([...chain.receipts.slice(0, 3), bad]);
    expect(read?.invalidSeqs).toEqual([4]);
    expect(read?.view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
    expect(readSandboxChain([{ nope: true }])).toBeNull();
  });
});
