import { describe, expect, it } from 'vitest';
import { planReconcile, type ListedContainer, type PoolHolding } from './reconcile-plan.js';

const managed = (id: string, worker: string, chain?: string): ListedContainer => ({
  id,
  names: [`/cairn-${chain ?? 'x'}-1`],
  labels: { 'io.cairn.managed': '1', 'io.cairn.worker': worker, ...(chain === undefined ? {} : { 'io.cairn.chain': chain }) },
});

describe('planReconcile', () => {
  const live = new Set(['run_live']);
  const keep = (chain: string) => live.has(chain);

  it('reaps this worker’s containers whose chain no lease holds', () => {
    const plan = planReconcile([managed('a', 'w1', 'run_live'), managed('b', 'w1', 'run_dead')], 'w1', keep);
    expect(plan).toEqual([{ id: 'b', name: 'cairn-run_dead-1', chainId: 'run_dead' }]);
  });

  it('never touches another worker’s, another tool’s or an unlabelled container', () => {
    const plan = planReconcile(
      [
        managed('other-worker', 'w2', 'run_dead'),
        { id: 'tool', names: ['/postgres'], labels: { 'io.cairn.worker': 'w1', 'io.cairn.chain': 'run_dead' } },
        { id: 'bare', names: ['/cairn-run_dead-1'], labels: {} },
        { id: 'not-one', names: ['/x'], labels: { 'io.cairn.managed': 'true', 'io.cairn.worker': 'w1' } },
      ],
      'w1',
      () => false,
    );
    expect(plan).toEqual([]);
  });

  it('reaps its own container with a missing or malformed chain label: no lease can hold it', () => {
    const plan = planReconcile([managed('c', 'w1'), managed('d', 'w1', 'RUN bad')], 'w1', () => true);
    expect(plan.map((t) => [t.id, t.chainId])).toEqual([
      ['c', null],
      ['d', null],
    ]);
  });

  it('names a target by its first name, or by its id when it has none', () => {
    const plan = planReconcile([{ ...managed('e', 'w1', 'run_x'), names: [] }], 'w1', () => false);
    expect(plan[0]?.name).toBe('e');
  });

  it('keeps a pool container idle in this process, judges a claimed one by its run, and reaps an unknown one', () => {
    const pooled = (id: string): ListedContainer => ({
      id,
      names: [`/cairn-pool-p1-${id}`],
      labels: { 'io.cairn.managed': '1', 'io.cairn.worker': 'w1', 'io.cairn.pool': 'p1' },
    });
    const holdings: Record<string, PoolHolding> = { warm: { kind: 'warm' }, live: { kind: 'claimed', chainId: 'run_live' }, dead: { kind: 'claimed', chainId: 'run_dead' } };
    const plan = planReconcile([pooled('warm'), pooled('live'), pooled('dead'), pooled('old')], 'w1', keep, (c) => holdings[c.id] ?? null);
    expect(plan.map((t) => [t.id, t.chainId])).toEqual([
      ['dead', 'run_dead'],
      ['old', null],
    ]);
    // Without a holder (another process, a restart), every pool container goes.
    expect(planReconcile([pooled('warm')], 'w1', () => true)).toEqual([{ id: 'warm', name: 'cairn-pool-p1-warm', chainId: null }]);
  });

  it('after a restart, judges a claimed pool container by the run its claim renamed it to', () => {
    const claimed = (id: string, chainId: string): ListedContainer => ({
      id,
      names: [`/cairn-${chainId}-1`],
      labels: { 'io.cairn.managed': '1', 'io.cairn.worker': 'w1', 'io.cairn.pool': 'p1' },
    });
    const plan = planReconcile([claimed('a', 'sbx_live'), claimed('b', 'run_dead')], 'w1', (chain) => chain === 'sbx_live');
    expect(plan).toEqual([{ id: 'b', name: 'cairn-run_dead-1', chainId: 'run_dead' }]);
  });
});
