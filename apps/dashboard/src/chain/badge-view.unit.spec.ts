import * as evidence from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import { chainBadgeView, checkedBadge } from './badge-view.js';
import { GENESIS_HASH, verifyChain } from './verify-chain.js';

/*
 * The chain badge's model: what the run and sandbox pages show for a chain this browser checked
 * (the page's own verifyChain on WebCrypto, over receipts hashed by libs/evidence as the services
 * hash them). A chain that records its own break (ADR 0033) is never shown verified.
 */

const RUN = 'run_01jbadgeview00000000000000';
const MESSAGE = `the message at stream seq 14 on cairn.evidence.${RUN}.step.completed, after seq 2, is not a receipt (not JSON); it is no part of the hash chain`;

/** A valid chain of these bodies, hashed as the services hash receipts. */
function chain(bodies: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  const receipts: Record<string, unknown>[] = [];
  let prev = GENESIS_HASH;
  for (const body of bodies) {
    const receipt = evidence.sealReceipt(prev, { v: 1, seq: receipts.length + 1, run_id: RUN, tenant: 'default', actor: 'runtime', ts: '2026-12-03T00:00:00.000Z', causation: null, ...body });
    receipts.push(receipt);
    prev = receipt.hash;
  }
  return receipts;
}

const alert = (fields: Record<string, unknown> = {}) => ({ type: 'alert.raised', severity: 'critical', error_code: 'E_CHAIN_BROKEN', message: MESSAGE, ...fields });
/** A run the poison message stopped: its failing receipts chain on, then it is sealed. */
const POISONED = [{ type: 'run.submitted' }, { type: 'step.started', index: 0 }, alert(), { type: 'run.failed', error_code: 'E_CHAIN_BROKEN', message: MESSAGE }, { type: 'sandbox.destroyed' }, { type: 'run.sealed' }];

async function viewOf(receipts: Record<string, unknown>[], server: { count: number; hash: string } | null = null) {
  return chainBadgeView(checkedBadge(await verifyChain(receipts, RUN), receipts, server));
}

describe('the chain badge', () => {
  it('is green for a chain that verifies and records no break, with its count and head', async () => {
    const receipts = chain([{ type: 'run.submitted' }, { type: 'step.completed', index: 0 }, { type: 'run.sealed' }]);
    const head = receipts.at(-1)!.hash as string;
    expect(await viewOf(receipts, { count: 3, hash: head })).toEqual({
      chain: 'verified',
      tone: 'ok',
      mark: '✓',
      text: `Chain verified in this browser: 3 receipts, head ${head.slice(0, 12)}…`,
      title: `head ${head}`,
      breakSeq: undefined,
    });
  });

  it('is red, naming the recorded seq and message, for a chain whose receipts verify but which records its own break: live and stored', async () => {
    const receipts = chain(POISONED);
    expect(evidence.verifyChain(receipts, { chainId: RUN })).toMatchObject({ ok: true, count: 6 });
    const broken = {
      chain: 'break-recorded',
      tone: 'bad',
      mark: '✗',
      text: `Chain broken: the receipts verify, but receipt #3 records that the chain was broken — ${MESSAGE}`,
      title: MESSAGE,
      breakSeq: 3,
    };
    // Stored: the whole sealed chain, the server's projection agreeing on its head.
    expect(await viewOf(receipts, { count: 6, hash: receipts.at(-1)!.hash as string })).toEqual(broken);
    // Live: from the alert's arrival on, before the run ended and before the projection caught up.
    for (const length of [3, 4, 5]) expect(await viewOf(receipts.slice(0, length), { count: 2, hash: receipts[1]!.hash as string })).toEqual(broken);
    expect((await viewOf(receipts.slice(0, 2))).chain).toBe('verified');
  });

  it('names the first of several recorded breaks', async () => {
    const receipts = chain([{ type: 'run.submitted' }, alert({ message: 'first' }), alert({ message: 'second' })]);
    expect(await viewOf(receipts)).toMatchObject({ chain: 'break-recorded', breakSeq: 2, title: 'first' });
  });

  it('stays green for a warning, an alert about another code, and a run.failed E_CHAIN_BROKEN without its alert', async () => {
    for (const body of [alert({ severity: 'warning' }), alert({ error_code: 'E_SECRET_SEEN' }), { type: 'run.failed', error_code: 'E_CHAIN_BROKEN', message: MESSAGE }]) {
      expect((await viewOf(chain([{ type: 'run.submitted' }, body]))).chain, JSON.stringify(body)).toBe('verified');
    }
  });

  it('names the first receipt that does not hold before any recorded break, and a head the server disagrees on after it', async () => {
    const receipts = chain(POISONED);
    receipts[1] = { ...receipts[1], index: 1 };
    expect(await viewOf(receipts)).toMatchObject({ chain: 'broken', tone: 'bad', breakSeq: undefined, text: expect.stringContaining('Chain broken at receipt #2: hash mismatch') as string });
    const clean = chain([{ type: 'run.submitted' }, { type: 'run.sealed' }]);
    expect(await viewOf(clean, { count: 2, hash: 'f'.repeat(64) })).toMatchObject({ chain: 'head-mismatch', tone: 'bad' });
    // A projection that has not caught up is not compared.
    expect((await viewOf(clean, { count: 1, hash: 'f'.repeat(64) })).chain).toBe('verified');
  });

  it('says when it is still checking, or cannot check here', () => {
    expect(chainBadgeView({ kind: 'checking' })).toMatchObject({ chain: 'checking', tone: 'muted' });
    expect(chainBadgeView({ kind: 'unavailable' })).toMatchObject({ chain: 'unavailable', tone: 'muted', title: 'WebCrypto needs HTTPS or localhost' });
  });
});
