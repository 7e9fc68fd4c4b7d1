import { describe, expect, it } from 'vitest';
import { receiptLine } from '../chain-file.writer.js';
import { parseChainId } from './export.command.js';
import { eventsPerSecond, formatRebuild } from './projections.command.js';
import { chainBrokenError, formatVerified } from './verify.command.js';

const plain = { okMark: () => 'OK' };
const HEAD = 'ab'.repeat(32);

describe('cairn verify formatting', () => {
  it('prints `OK  <n> receipts  chain <id>  head <hash>` and the JSON shape', () => {
    const { human, machine } = formatVerified({ ok: true, chainId: 'run_a', count: 12, headHash: HEAD, headSeq: 12 }, 'chain', plain);
    expect(human).toBe(`OK  12 receipts  chain run_a  head ${HEAD}`);
    expect(machine).toEqual({ ok: true, chainId: 'run_a', count: 12, headHash: HEAD });
  });

  it('says receipt for one, and marks a proof bundle', () => {
    const { human } = formatVerified({ ok: true, chainId: 'sbx_b', count: 1, headHash: HEAD, headSeq: 1 }, 'bundle', plain);
    expect(human).toBe(`OK  1 receipt  chain sbx_b  head ${HEAD}  (proof bundle)`);
  });

  it('turns a broken chain into E_CHAIN_BROKEN with the first bad seq and reason', () => {
    const error = chainBrokenError({ ok: false, code: 'E_CHAIN_BROKEN', firstBadSeq: 4, reason: 'hash_mismatch', message: 'hash x does not match', verified: 3 });
    expect(error.toBody()).toEqual({
      code: 'E_CHAIN_BROKEN',
      message: 'chain broken at seq 4 (hash_mismatch): hash x does not match',
      details: { firstBadSeq: 4, reason: 'hash_mismatch' },
    });
  });
});

describe('cairn export arguments', () => {
  it('accepts run and sandbox ids', () => {
    expect(parseChainId('run_abc-1')).toBe('run_abc-1');
    expect(parseChainId('sbx_x')).toBe('sbx_x');
  });

  it.each(['RUN_A', 'run_', 'job_1', 'run_a.b', 'run_*', 'run_>', ''])('refuses %j with E_INPUT', (id) => {
    expect(() => parseChainId(id)).toThrow(expect.objectContaining({ code: 'E_INPUT' }) as Error);
  });

  it('writes one receipt per line', () => {
    expect(receiptLine({ a: 'x\ny', b: 1 })).toBe('{"a":"x\\ny","b":1}\n');
  });
});

describe('cairn projections rebuild formatting', () => {
  it('reports events, poison, runs and events/s', () => {
    const summary = { events: 2500, poison: 1, runs: 40, lastStreamSeq: 2501, durationMs: 500 };
    expect(eventsPerSecond(summary)).toBe(5000);
    const { human, machine } = formatRebuild(summary, 'OK');
    expect(human).toBe('OK  rebuilt projections: 2500 events, 1 poison, 40 runs  (0.50 s, 5000 events/s, up to stream seq 2501)');
    expect(machine).toEqual({ ok: true, ...summary, eventsPerSecond: 5000 });
  });

  it('does not divide by zero', () => {
    expect(eventsPerSecond({ events: 0, durationMs: 0 })).toBe(0);
  });
});
