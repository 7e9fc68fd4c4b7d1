import { describe, expect, it } from 'vitest';
import { formatDown } from './down.command.js';
import { formatBuilt } from './images.command.js';
import { parseIdempotencyKey } from './follow-run.js';
import { parseLimit, parseRunId, parseState } from './status.command.js';
import { formatUp, parseSeconds } from './up.command.js';
import { checkBundleClaims, formatClaims, isRunReference } from './verify.command.js';

const HEAD = 'ab'.repeat(32);

describe('cairn up and down output', () => {
  const result = {
    url: 'http://127.0.0.1:7420',
    apiKey: 'cairn_abcdefgh_secret',
    keyFile: '/h/api-key',
    home: '/h',
    stackId: 'default',
    restarted: [] as never[],
    services: { gateway: 42 },
    logDir: '/h/logs',
  };

  it('prints the URL and the key, and says whether it started, was running or restarted something', () => {
    const started = formatUp({ ...result, outcome: 'started' }, 'OK');
    expect(started.human.split('\n')[0]).toBe('OK  Cairn is up  http://127.0.0.1:7420');
    expect(started.human).toContain('api key   cairn_abcdefgh_secret');
    expect(started.machine).toMatchObject({ ok: true, url: result.url, apiKey: result.apiKey, outcome: 'started', services: { gateway: 42 } });
    expect(formatUp({ ...result, outcome: 'running' }, 'OK').human).toContain('Cairn is already up  http://127.0.0.1:7420');
    expect(formatUp({ ...result, outcome: 'restarted', restarted: ['runtime', 'grader'] }, 'OK').human).toContain('(restarted runtime, grader)');
  });

  it('says which processes needed SIGKILL, and when there was nothing to stop', () => {
    const stopped = formatDown(
      {
        home: '/h',
        wasRunning: true,
        stopped: [
          { service: 'gateway', pid: 1, signal: 'SIGTERM' },
          { service: 'policy', pid: 2, signal: 'SIGKILL' },
        ],
      },
      'OK',
    );
    expect(stopped.human).toBe('OK  stopped 2 processes (policy needed SIGKILL)');
    expect(formatDown({ home: '/h', wasRunning: false, stopped: [] }, 'OK').human).toBe('OK  no stack to stop in /h');
  });
});

describe('arguments', () => {
  it('takes seconds as positive numbers', () => {
    expect(parseSeconds('1.5', '--timeout')).toBe(1500);
    for (const bad of ['0', '-1', 'soon', '']) expect(() => parseSeconds(bad, '--timeout')).toThrow(expect.objectContaining({ code: 'E_INPUT' }) as Error);
  });

  it('takes idempotency keys of 1–200 printable ASCII characters', () => {
    expect(parseIdempotencyKey('deploy-42')).toBe('deploy-42');
    for (const bad of ['', 'a b', 'x'.repeat(201), 'é']) expect(() => parseIdempotencyKey(bad)).toThrow(expect.objectContaining({ code: 'E_INPUT' }) as Error);
  });

  it('takes run ids, limits and states', () => {
    expect(parseRunId('run_01abc')).toBe('run_01abc');
    for (const bad of ['sbx_1', 'RUN_1', 'run_', 'run_a.b']) expect(() => parseRunId(bad)).toThrow(expect.objectContaining({ code: 'E_INPUT' }) as Error);
    expect(parseLimit('200')).toBe(200);
    expect(() => parseLimit('201')).toThrow(/1 to 200/);
    expect(parseState('rollback')).toBe('ROLLBACK');
    expect(() => parseState('DONE')).toThrow(/SEALED/);
  });
});

describe('cairn verify of a proof bundle', () => {
  const verified = { ok: true as const, chainId: 'run_a', count: 3, headHash: HEAD, headSeq: 3 };
  const claims = { runId: 'run_a', headHash: HEAD, verdict: 'SUPPORTS', grade: { score: 3, maxScore: 4, upperBound: 3 }, artifacts: { '/out/x': HEAD } };

  it('accepts a bundle whose statements agree with its receipts, and shows verdict and grade', () => {
    expect(() => checkBundleClaims(verified, claims)).not.toThrow();
    expect(formatClaims(claims).human).toBe('verdict SUPPORTS  grade 3/4  artifacts 1');
  });

  it('refuses a bundle that names another head or another run (E_CHAIN_BROKEN)', () => {
    expect(() => checkBundleClaims(verified, { ...claims, headHash: 'cd'.repeat(32) })).toThrow(expect.objectContaining({ code: 'E_CHAIN_BROKEN', details: expect.objectContaining({ reason: 'head_mismatch' }) as object }) as Error);
    expect(() => checkBundleClaims(verified, { ...claims, runId: 'run_b' })).toThrow(expect.objectContaining({ code: 'E_CHAIN_BROKEN' }) as Error);
  });

  it('fetches a run id from the stack, unless a file of that name is here', () => {
    expect(isRunReference('run_01abc')).toBe(true);
    expect(isRunReference('sbx_01abc')).toBe(true);
    expect(isRunReference('run_01abc.jsonl')).toBe(false);
    expect(isRunReference('package.json')).toBe(false);
  });
});

describe('cairn images build output', () => {
  it('lines up tags and ids', () => {
    const text = formatBuilt(
      [
        { tag: 'cairn/sandbox-busybox:1', id: `sha256:${HEAD}`, durationMs: 812 },
        { tag: 'cairn/sandbox-debian:1', id: `sha256:${HEAD}`, durationMs: 95_000 },
      ],
      'OK',
    );
    expect(text.split('\n')).toEqual([`OK  cairn/sandbox-busybox:1  sha256:${HEAD}  (0.8 s)`, `OK  cairn/sandbox-debian:1   sha256:${HEAD}  (95.0 s)`]);
  });
});
