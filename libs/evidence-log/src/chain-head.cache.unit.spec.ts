import { describe, expect, it } from 'vitest';
import { ChainHeadCache } from './chain-head.cache.js';

const head = (streamSeq: number, seq = streamSeq) => ({ streamSeq, seq, hash: String(streamSeq).padStart(64, '0'), msgId: `m${streamSeq}` });

describe('ChainHeadCache', () => {
  it('evicts the least recently used chain past its capacity', () => {
    const cache = new ChainHeadCache(2);
    cache.advance('run_a', head(1));
    cache.advance('run_b', head(2));
    expect(cache.get('run_a')).toEqual(head(1)); // run_a is now the most recent
    cache.advance('run_c', head(3));
    expect(cache.size).toBe(2);
    expect(cache.get('run_b')).toBeUndefined();
    expect(cache.get('run_a')).toEqual(head(1));
    expect(cache.get('run_c')).toEqual(head(3));
  });

  it('never moves a head backwards', () => {
    const cache = new ChainHeadCache(10);
    cache.advance('run_a', head(5, 2));
    cache.advance('run_a', head(3, 1));
    expect(cache.get('run_a')).toEqual(head(5, 2));
    cache.advance('run_a', head(9, 3));
    expect(cache.get('run_a')).toEqual(head(9, 3));
  });

  it('forgets a chain', () => {
    const cache = new ChainHeadCache(10);
    cache.advance('run_a', head(1));
    cache.forget('run_a');
    expect(cache.get('run_a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });
});
