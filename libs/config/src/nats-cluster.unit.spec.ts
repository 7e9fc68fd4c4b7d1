import { describe, expect, it } from 'vitest';
import { isLeaderless, replicasHint, replicasProblem, whileLeaderless } from './nats-cluster.js';

class TimeoutError extends Error {
  override name = 'TimeoutError';
}

describe('replicasProblem', () => {
  it('is null when the replicas match (a missing field is one), else names the setting and both fixes', () => {
    expect(replicasProblem('S', 3, 3)).toBeNull();
    expect(replicasProblem('S', undefined, 1)).toBeNull();
    expect(replicasProblem('KV_b', 1, 3)).toBe('num_replicas is 1, not the 3 CAIRN_NATS_REPLICAS asks for (scale it with `nats stream edit KV_b --replicas 3`, or set CAIRN_NATS_REPLICAS=1)');
  });
});

describe('replicasHint', () => {
  it('explains only a refusal that says the servers cannot place the replicas', () => {
    expect(replicasHint(10074, 3)).toContain('must be a JetStream cluster of at least 3 nodes');
    expect(replicasHint(10023, 5)).toContain('at least 5 nodes');
    expect(replicasHint(10074, 1)).toBe('');
    expect(replicasHint(10058, 3)).toBe('');
    expect(replicasHint(undefined, 3)).toBe('');
  });
});

describe('whileLeaderless', () => {
  it('asks again while a cluster answers nobody, and returns the first answer', async () => {
    let calls = 0;
    const answer = await whileLeaderless(() => {
      calls += 1;
      if (calls === 1) return Promise.reject(new TimeoutError('timeout'));
      if (calls === 2) return Promise.reject(new Error('jetstream is not enabled'));
      return Promise.resolve('stream info');
    });
    expect(answer).toBe('stream info');
    expect(calls).toBe(3);
  });

  it('throws any other error at once, and a leaderless one once the wait is over', async () => {
    let calls = 0;
    await expect(
      whileLeaderless(() => {
        calls += 1;
        return Promise.reject(new Error('stream not found'));
      }),
    ).rejects.toThrow('stream not found');
    expect(calls).toBe(1);
    const started = Date.now();
    await expect(whileLeaderless(() => Promise.reject(new TimeoutError('timeout')), 600)).rejects.toThrow('timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(590);
    expect(isLeaderless('timeout')).toBe(false);
  });
});
