import { describe, expect, it } from 'vitest';
import { FIELDS, RunChain as ChainBuilder } from './run-chain.fixture.js';
import { readRunChain, readValidRunChain } from './run-chain.reader.js';

describe('readRunChain', () => {
  it('parses every receipt and folds the run', () => {
    const chain = new ChainBuilder();
    chain.add('run.submitted', FIELDS.submitted());
    chain.add('policy.decided', FIELDS.policy('allow'));
    const read = readRunChain(chain.receipts);
    expect(read?.receipts.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided']);
    expect(read?.invalidSeqs).toEqual([]);
    expect(read?.view).toMatchObject({ state: 'SUBMITTED', sealed: false, errorCode: null });
  });

  it('keeps a receipt that breaks its contract out of the receipts, and folds it as unknown: the run fails E_UNKNOWN_STATE', () => {
    const chain = new ChainBuilder();
    chain.add('run.submitted', FIELDS.submitted());
    chain.add('policy.decided', FIELDS.policy('allow'));
    const broken = { ...chain.receipts[1], decision: 'maybe' };
    const read = readRunChain([chain.receipts[0], broken]);
    expect(read?.receipts.map((r) => r.type)).toEqual(['run.submitted']);
    expect(read?.invalidSeqs).toEqual([2]);
    expect(read?.view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });

  it('is null when an item is not even a receipt envelope, and has no view for an empty chain', () => {
    expect(readRunChain([{ hello: 'world' }])).toBeNull();
    expect(readRunChain([])).toEqual({ receipts: [], invalidSeqs: [], view: null });
  });
});

describe('readValidRunChain', () => {
  it('reads a chain whose every receipt meets its contract, and refuses one that does not', () => {
    const chain = new ChainBuilder();
    chain.add('run.submitted', FIELDS.submitted());
    chain.add('policy.decided', FIELDS.policy('allow'));
    expect(readValidRunChain(chain.receipts)).toMatchObject({ view: { state: 'SUBMITTED' } });
    expect(readValidRunChain(chain.receipts)).not.toHaveProperty('invalidSeqs');
    expect(readValidRunChain([chain.receipts[0], { ...chain.receipts[1], decision: 'maybe' }])).toBeNull();
    expect(readValidRunChain([{ hello: 'world' }])).toBeNull();
  });
});
