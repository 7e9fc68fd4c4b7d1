import { uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX_IMAGE_TAG } from '../src/index.js';
import { codeOf, sandboxFixture } from './sandbox.fixture.js';

const fx = sandboxFixture('rec');
const otherWorker = uniqueName('rec-other-wrk');
const unlabelled: string[] = [];

beforeAll(async () => {
  await fx.ready();
});

afterAll(async () => {
  await fx.removeLabelled([fx.workerId, otherWorker]);
  await Promise.all(unlabelled.map((id) => fx.docker.getContainer(id).remove({ force: true }).catch(() => undefined)));
});

describe('reconcile', () => {
  it('reaps only this worker’s orphans: never a live chain, another worker’s or an unlabelled container', async () => {
    const live = await fx.driver.create(fx.spec());
    const orphan = await fx.driver.create(fx.spec());
    const othersOrphan = await fx.driver.create(fx.spec({ workerId: otherWorker }));
    // Named like a Cairn sandbox but without labels: the name alone never makes a target.
    const lookalike = await fx.docker.createContainer({ name: `cairn-${fx.chainId()}-1`, Image: BUSYBOX_IMAGE_TAG, Cmd: ['sleep', '60'] });
    unlabelled.push(lookalike.id);
    // This worker's, but with no chain label: no lease can hold it, so it is reaped.
    const chainlessName = uniqueName('rec-chainless');
    const chainless = await fx.docker.createContainer({
      name: chainlessName,
      Image: BUSYBOX_IMAGE_TAG,
      Cmd: ['sleep', '60'],
      Labels: { 'io.cairn.managed': '1', 'io.cairn.worker': fx.workerId },
    });

    const reaped = await fx.driver.reconcile(fx.workerId, (chainId) => chainId === live.chainId);

    expect([...reaped].sort()).toEqual([orphan.name, chainlessName].sort());
    expect(await fx.engineKnows(orphan.id)).toBe(false);
    expect(await fx.engineKnows(chainless.id)).toBe(false);
    expect(await fx.engineKnows(live.id)).toBe(true);
    expect(await fx.engineKnows(othersOrphan.id)).toBe(true);
    expect(await fx.engineKnows(lookalike.id)).toBe(true);

    // The survivors are then removed by their owners (here: the test).
    expect(await fx.driver.reconcile(otherWorker, () => false)).toEqual([othersOrphan.name]);
    expect(await fx.driver.destroy(live)).toEqual({ verifiedGone: true });
  });

  it('refuses a malformed worker id with E_INPUT', async () => {
    expect(await codeOf(fx.driver.reconcile('', () => false))).toBe('E_INPUT');
    expect(await codeOf(fx.driver.reconcile('a=b', () => false))).toBe('E_INPUT');
  });
});

describe('reapChain', () => {
  it('reaps one chain’s sandboxes — held by this driver or only labelled — and nothing of another chain or worker', async () => {
    const chainId = fx.chainId();
    const held = await fx.driver.create(fx.spec({ chainId }));
    // Left by a predecessor: labelled with the chain, unknown to this driver.
    const leftName = uniqueName('rec-left');
    const left = await fx.docker.createContainer({
      name: leftName,
      Image: BUSYBOX_IMAGE_TAG,
      Cmd: ['sleep', '60'],
      Labels: { 'io.cairn.managed': '1', 'io.cairn.worker': fx.workerId, 'io.cairn.chain': chainId },
    });
    // A warm one claimed by the chain before a restart: pool labels, the chain's name.
    const claimed = await fx.docker.createContainer({
      name: `cairn-${chainId}-2`,
      Image: BUSYBOX_IMAGE_TAG,
      Cmd: ['sleep', '60'],
      Labels: { 'io.cairn.managed': '1', 'io.cairn.worker': fx.workerId, 'io.cairn.pool': 'p-test' },
    });
    const otherChain = await fx.driver.create(fx.spec());
    const otherWorkersSameChain = await fx.docker.createContainer({
      name: uniqueName('rec-other'),
      Image: BUSYBOX_IMAGE_TAG,
      Cmd: ['sleep', '60'],
      Labels: { 'io.cairn.managed': '1', 'io.cairn.worker': otherWorker, 'io.cairn.chain': chainId },
    });

    const reaped = await fx.driver.reapChain(fx.workerId, chainId);

    expect([...reaped].sort()).toEqual([held.name, leftName, `cairn-${chainId}-2`].sort());
    expect(await fx.engineKnows(held.id)).toBe(false);
    expect(await fx.engineKnows(claimed.id)).toBe(false);
    expect(await fx.engineKnows(left.id)).toBe(false);
    expect(await fx.engineKnows(otherChain.id)).toBe(true);
    expect(await fx.engineKnows(otherWorkersSameChain.id)).toBe(true);
    // Nothing left of it: a second reap finds nothing.
    expect(await fx.driver.reapChain(fx.workerId, chainId)).toEqual([]);
    expect(await fx.driver.destroy(otherChain)).toEqual({ verifiedGone: true });
    expect(await fx.driver.reapChain(otherWorker, chainId)).toHaveLength(1);
  });

  it('refuses a malformed worker or chain id with E_INPUT', async () => {
    expect(await codeOf(fx.driver.reapChain('a=b', fx.chainId()))).toBe('E_INPUT');
    expect(await codeOf(fx.driver.reapChain(fx.workerId, 'run_A=B'))).toBe('E_INPUT');
  });
});
