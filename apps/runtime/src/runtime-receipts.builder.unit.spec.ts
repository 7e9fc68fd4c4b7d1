import { EVENT_BODY_SCHEMAS } from '@cairn/contracts';
import type { EventType, EvidenceReceiptOf, SandboxHardening } from '@cairn/contracts';
import { canonicalJson } from '@cairn/evidence';
import type { ExecResult, SandboxHandle } from '@cairn/sandbox';
import { describe, expect, it } from 'vitest';
import {
  egressDeniedFields,
  grantedCaps,
  interruptedStepFields,
  limitsHit,
  runExecutedFields,
  runFailedFields,
  sandboxCaps,
  runCancelledFields,
  sandboxCreatedFields,
  sandboxDestroyedFields,
  stepApprovalKey,
  stepCompletedFields,
  stepStartedFields,
} from './runtime-receipts.builder.js';
import type { PlannedStep } from './step-plan.js';

/** The fields as a whole receipt body, parsed with the contract: what `ReactionContext.append` checks too. */
function asBody(type: EventType, fields: object): unknown {
  const body = { v: 1, seq: 9, run_id: 'run_unit1', tenant: 'acme', type, actor: 'runtime', ts: '2026-11-30T00:00:00.000Z', causation: 'run_unit1:4', ...fields };
  return EVENT_BODY_SCHEMAS[type].parse(body);
}

const SHA_A = 'a'.repeat(64);
const SHA_B = 'b'.repeat(64);
const IMAGE_ID = `sha256:${'c'.repeat(64)}`;
const caps = { wallSeconds: 30, memoryMiB: 64, pids: 32, diskMiB: 16, cpus: 0.5 };
const handle: SandboxHandle = { id: 'abc', name: 'cairn-run_unit1-1', chainId: 'run_unit1', workerId: 'w1', imageId: IMAGE_ID, caps };
const step: PlannedStep = { index: 1, argv: ['/bin/sh', '-c', 'exit 3'], tool: 'sh', workdir: '/work', env: { B: '2', A: '1' }, envNames: ['A', 'B'], timeoutMs: 5000 };

function result(overrides: Partial<ExecResult> = {}): ExecResult {
  return {
    exitCode: 3,
    stdout: new Uint8Array([104, 105]),
    stderr: new Uint8Array(),
    stdoutBytes: 2,
    stderrBytes: 0,
    truncated: false,
    durationMs: 41.6,
    limitHit: null,
    limits: [],
    outputBudgetHit: false,
    teardown: null,
    ...overrides,
  };
}

describe('stepApprovalKey', () => {
  it('given a step approval, when asked in attempt 1 and again in attempt 2, then attempt 1 keeps its id as the key and attempt 2 has its own', () => {
    expect(stepApprovalKey('apr-step-1', 1)).toBe('apr-step-1');
    expect(stepApprovalKey('apr-step-1', 2)).toBe('apr-step-1@attempt-2');
    expect(new Set([1, 2, 3].map((attempt) => stepApprovalKey('apr-step-1', attempt))).size).toBe(3);
  });
});

describe('caps', () => {
  it('go between the receipts’ snake_case and the sandbox port unchanged', () => {
    const granted = { wall_seconds: 30, memory_mib: 64, pids: 32, disk_mib: 16, cpus: 0.5 };
    expect(sandboxCaps(granted)).toEqual(caps);
    expect(grantedCaps(sandboxCaps(granted))).toEqual(granted);
  });
});

const HARDENING: SandboxHardening = {
  read_only_root: true,
  cap_drop: ['ALL'],
  cap_add: [],
  no_new_privileges: true,
  user: '65520:65520',
  init: true,
  pids_limit: 32,
  memory_bytes: 80 * 1024 * 1024,
  network: 'none',
  tmpfs: { '/work': { size_bytes: 8 * 1024 * 1024, exec: true } },
  seccomp: 'default',
};

describe('sandbox.created', () => {
  it('names the container, worker, driver, granted image, started digest, caps, network and the hardening in force', () => {
    const fields = sandboxCreatedFields(handle, 'cairn/sandbox-busybox:1', HARDENING);
    expect(fields).toEqual({
      container_name: 'cairn-run_unit1-1',
      worker_id: 'w1',
      driver: 'docker',
      image: 'cairn/sandbox-busybox:1',
      image_digest: IMAGE_ID,
      caps: { wall_seconds: 30, memory_mib: 64, pids: 32, disk_mib: 16, cpus: 0.5 },
      network: 'none',
      hardening: HARDENING,
    });
    expect(() => asBody('sandbox.created', fields)).not.toThrow();
  });

  it('records no digest when the engine gave no sha256 id', () => {
    expect(sandboxCreatedFields({ ...handle, imageId: 'weird' }, 'x:1', HARDENING).image_digest).toBeNull();
  });
});

describe('egress', () => {
  it('records an egress sandbox as such, with the network its hardening names', () => {
    const hardening = { ...HARDENING, network: 'cairn-egress-run_unit1-1' };
    const fields = sandboxCreatedFields(handle, 'cairn/sandbox-busybox:1', hardening, 'egress_proxy');
    expect(fields).toMatchObject({ network: 'egress_proxy', hardening: { network: 'cairn-egress-run_unit1-1' } });
    expect(() => asBody('sandbox.created', fields)).not.toThrow();
  });

  it('records a refused connection as E_EGRESS, with the step it happened in when there was one', () => {
    const during = egressDeniedFields({ host: 'evil.test', port: 443, reason: 'not_allowlisted' }, 2);
    expect(during).toEqual({ host: 'evil.test', port: 443, reason: 'not_allowlisted', error_code: 'E_EGRESS', step_index: 2 });
    expect(() => asBody('egress.denied', during)).not.toThrow();
    expect(egressDeniedFields({ host: '::1', port: 80, reason: 'private_address' }, null)).toEqual({ host: '::1', port: 80, reason: 'private_address', error_code: 'E_EGRESS' });
  });
});

describe('a step stopped from outside (a cancel)', () => {
  it('never exited, was killed with its sandbox, carries no cap code, and says its output is not known', () => {
    const fields = interruptedStepFields(step, 1234.4, SHA_A);
    expect(fields).toEqual({
      step_index: 1,
      stage: 'step',
      tool: 'sh',
      argv: ['/bin/sh', '-c', 'exit 3'],
      exit_code: null,
      signal: 'SIGKILL',
      stdout_sha256: SHA_A,
      stderr_sha256: SHA_A,
      stdout_bytes: 0,
      stderr_bytes: 0,
      output_truncated: true,
      duration_ms: 1234,
      limits_hit: [],
      redactions: [],
      artifact_hashes: {},
    });
    expect(fields).not.toHaveProperty('error_code');
    expect(() => asBody('step.completed', fields)).not.toThrow();
  });
});

describe('run.cancelled answering a request', () => {
  it('names who asked and why, from the request', () => {
    const request = asBody('run.cancel_requested', { requested_by: 'key:k1', reason: 'stop it' }) as EvidenceReceiptOf<'run.cancel_requested'>;
    expect(runCancelledFields(request)).toEqual({ cancelled_by: 'key:k1', reason: 'stop it' });
    const { reason: _reason, ...noReason } = request;
    expect(runCancelledFields(noReason)).toEqual({ cancelled_by: 'key:k1' });
    expect(() => asBody('run.cancelled', runCancelledFields(request))).not.toThrow();
  });
});

describe('step.started', () => {
  it('records argv, tool, workdir and the env names only', () => {
    const fields = stepStartedFields(step);
    expect(fields).toEqual({ step_index: 1, stage: 'step', tool: 'sh', argv: ['/bin/sh', '-c', 'exit 3'], workdir: '/work', env_names: ['A', 'B'] });
    expect(JSON.stringify(fields)).not.toContain('"1"');
    expect(() => asBody('step.started', fields)).not.toThrow();
  });
});

describe('step.completed', () => {
  it('is a result for a non-zero exit: no error code, no limits', () => {
    const fields = stepCompletedFields(step, result(), { stdoutSha256: SHA_A, stderrSha256: SHA_B });
    expect(fields).toEqual({
      step_index: 1,
      stage: 'step',
      tool: 'sh',
      argv: ['/bin/sh', '-c', 'exit 3'],
      exit_code: 3,
      signal: null,
      stdout_sha256: SHA_A,
      stderr_sha256: SHA_B,
      stdout_bytes: 2,
      stderr_bytes: 0,
      output_truncated: false,
      duration_ms: 42,
      limits_hit: [],
      redactions: [],
      artifact_hashes: {},
    });
    expect(() => asBody('step.completed', fields)).not.toThrow();
  });

  it('names the cap that stopped the step, every cap seen, and the kill', () => {
    const hit = result({
      exitCode: null,
      limitHit: 'E_MEM_LIMIT',
      limits: [
        { limit: 'E_TIMEOUT', atMs: 900, evidence: 'the wall-time deadline passed' },
        { limit: 'E_MEM_LIMIT', atMs: 300, evidence: 'oom_kill 0→1' },
      ],
      teardown: { verifiedGone: true },
    });
    const fields = stepCompletedFields(step, hit, { stdoutSha256: SHA_A, stderrSha256: SHA_B });
    expect(fields).toMatchObject({ exit_code: null, signal: 'SIGKILL', limits_hit: ['memory', 'wall_time'], error_code: 'E_MEM_LIMIT' });
    expect(() => asBody('step.completed', fields)).not.toThrow();
  });

  it('counts every byte written and says when the output was cut', () => {
    const cut = result({ stdoutBytes: 5_000_000, truncated: true });
    const fields = stepCompletedFields(step, cut, { stdoutSha256: SHA_A, stderrSha256: SHA_B });
    expect(fields).toMatchObject({ stdout_bytes: 5_000_000, output_truncated: true, limits_hit: ['output_bytes'] });
    expect(fields.error_code).toBeUndefined();
  });
});

describe('limitsHit', () => {
  it('lists each kind once, in the order first seen', () => {
    expect(
      limitsHit({
        truncated: false,
        limits: [
          { limit: 'E_PROC_LIMIT', atMs: 50, evidence: 'a' },
          { limit: 'E_DISK_LIMIT', atMs: 10, evidence: 'b' },
          { limit: 'E_PROC_LIMIT', atMs: 70, evidence: 'c' },
        ],
      }),
    ).toEqual(['disk', 'pids']);
  });
});

describe('sandbox.destroyed, run.executed, run.failed', () => {
  it('build contract-valid bodies', () => {
    const destroyed = sandboxDestroyedFields('cairn-run_unit1-1', true, 'completed', 812.4);
    expect(destroyed).toEqual({ container_name: 'cairn-run_unit1-1', verified_gone: true, reason: 'completed', duration_ms: 812 });
    expect(() => asBody('sandbox.destroyed', destroyed)).not.toThrow();
    expect(sandboxDestroyedFields('c', false, 'reaped')).toEqual({ container_name: 'c', verified_gone: false, reason: 'reaped' });

    const executed = runExecutedFields([{ exitCode: 0 }, { exitCode: 3 }], { '/out/a.txt': SHA_A }, 1234.5);
    expect(executed).toEqual({ steps_completed: 2, exit_codes: [0, 3], artifact_hashes: { '/out/a.txt': SHA_A }, duration_ms: 1235 });
    expect(() => asBody('run.executed', executed)).not.toThrow();

    const failed = runFailedFields('E_TIMEOUT', 'step 1 hit a cap', 1);
    expect(failed).toEqual({ error_code: 'E_TIMEOUT', message: 'step 1 hit a cap', step_index: 1 });
    expect(() => asBody('run.failed', failed)).not.toThrow();
  });

  it('says how many output files were skipped for their names, and only when some were', () => {
    const executed = runExecutedFields([{ exitCode: 0 }], { '/out/a.txt': SHA_A }, 10, 3);
    expect(executed.outputs_skipped).toBe(3);
    expect(() => asBody('run.executed', executed)).not.toThrow();
    expect(runExecutedFields([{ exitCode: 0 }], {}, 10, 0)).not.toHaveProperty('outputs_skipped');
  });

  it('keeps a failure message canonicalisable: a surrogate pair the cut would split is dropped whole, a lone one replaced', () => {
    const cut = runFailedFields('E_INTERNAL', `${'x'.repeat(2047)}\u{1F600}tail`);
    expect(cut.message).toBe('x'.repeat(2047));
    expect(cut.message.isWellFormed()).toBe(true);
    const lone = runFailedFields('E_INTERNAL', 'name \uD83D here');
    expect(lone.message).toBe('name \uFFFD here');
    expect(() => canonicalJson(asBody('run.failed', cut) as object)).not.toThrow();
  });

  it('keeps a failure message within the contract: no NUL, at most 2048 characters', () => {
    const failed = runFailedFields('E_INTERNAL', `a\u0000b${'x'.repeat(3000)}`);
    expect(failed.message.startsWith('ab')).toBe(true);
    expect(failed.message).toHaveLength(2048);
    expect(failed.step_index).toBeUndefined();
    expect(() => asBody('run.failed', failed)).not.toThrow();
  });
});
