import { describe, expect, it } from 'vitest';
import { ChainCache } from './chain-cache.js';

const bytes = (text: string) => new TextEncoder().encode(text);
const S = 'cairn.evidence.run_a.step.started';

describe('ChainCache', () => {
  it('serves a chain seen from seq 1 without a gap, up to the head asked for', () => {
    const cache = new ChainCache();
    cache.observe('run_a', 1, 10, bytes('one'), S);
    cache.observe('run_a', 2, 12, bytes('two'), S);
    cache.observe('run_a', 3, 15, bytes('three'), S);
    expect(cache.upTo('run_a', 3, 15)?.map((m) => m.streamSeq)).toEqual([10, 12, 15]);
    expect(cache.upTo('run_a', 2, 12)?.map((m) => m.streamSeq)).toEqual([10, 12]);
  });

  it('does not serve a head it has not seen, nor one stored elsewhere', () => {
    const cache = new ChainCache();
    cache.observe('run_a', 1, 10, bytes('one'), S);
    expect(cache.upTo('run_a', 2, 11)).toBeNull();
    expect(cache.upTo('run_a', 1, 99)).toBeNull();
    // A mismatch forgets the chain altogether.
    expect(cache.upTo('run_a', 1, 10)).toBeNull();
  });

  it('starts a chain only at seq 1, and keeps the prefix it holds past a gap (a consumer of some types sees chains so)', () => {
    const cache = new ChainCache();
    cache.observe('run_a', 2, 11, bytes('two'), S);
    expect(cache.size).toBe(0);
    cache.observe('run_a', 1, 10, bytes('one'), S);
    cache.observe('run_a', 3, 12, bytes('three'), S);
    expect(cache.upTo('run_a', 1, 10)).toHaveLength(1);
    expect(cache.held('run_a').map((m) => m.streamSeq)).toEqual([10]);
    expect(cache.upTo('run_a', 3, 12)).toBeNull();
    expect(cache.held('run_b')).toEqual([]);
  });

  it('ignores a message seen again, and forgets the chain when a seq is seen at another stream seq', () => {
    const cache = new ChainCache();
    cache.observe('run_a', 1, 10, bytes('one'), S);
    cache.observe('run_a', 2, 11, bytes('two'), S);
    cache.observe('run_a', 1, 10, bytes('one'), S);
    expect(cache.upTo('run_a', 2, 11)).toHaveLength(2);
    cache.observe('run_a', 2, 13, bytes('other'), S);
    expect(cache.upTo('run_a', 2, 11)).toBeNull();
  });

  it('refuses a next seq stored before the last one (not the same chain)', () => {
    const cache = new ChainCache();
    cache.observe('run_a', 1, 10, bytes('one'), S);
    cache.observe('run_a', 2, 9, bytes('two'), S);
    expect(cache.upTo('run_a', 1, 10)).toBeNull();
  });

  it('keeps a whole read, and drops the least recently used chain past its bound', () => {
    const cache = new ChainCache(2);
    cache.remember('run_a', [{ streamSeq: 1, subject: S, data: bytes('a') }]);
    cache.remember('run_b', [{ streamSeq: 2, subject: S, data: bytes('b') }]);
    expect(cache.upTo('run_a', 1, 1)).not.toBeNull();
    cache.remember('run_c', [{ streamSeq: 3, subject: S, data: bytes('c') }]);
    expect(cache.upTo('run_b', 1, 2)).toBeNull();
    expect(cache.upTo('run_a', 1, 1)).not.toBeNull();
    expect(cache.upTo('run_c', 1, 3)).not.toBeNull();
  });

  it('takes a later message stored before the last held one as another chain, and forgets it', () => {
    const cache = new ChainCache();
    cache.observe('run_a', 1, 10, bytes('one'), S);
    cache.observe('run_a', 3, 9, bytes('three'), S);
    expect(cache.held('run_a')).toEqual([]);
  });

  it('keeps what was parsed of a message, for that message only', () => {
    const cache = new ChainCache();
    cache.observe('run_a', 1, 10, bytes('one'), S);
    const parsed = Object.freeze({ seq: 1 });
    cache.adopt('run_a', 1, 11, Object.freeze({ seq: 1, other: true }));
    expect(cache.parsedAt('run_a', 1, 10)).toBeUndefined();
    cache.adopt('run_a', 1, 10, parsed);
    cache.adopt('run_a', 1, 10, Object.freeze({ seq: 1, later: true }));
    expect(cache.parsedAt('run_a', 1, 10)).toBe(parsed);
    expect(cache.upTo('run_a', 1, 10)?.[0]?.parsed).toBe(parsed);
    expect(cache.parsedAt('run_a', 1, 11)).toBeUndefined();
    expect(cache.parsedAt('run_a', 2, 12)).toBeUndefined();
  });
});
