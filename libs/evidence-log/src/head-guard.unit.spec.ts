import { CairnError, isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { checkExpectedHeadSeq, HEAD_MOVED, headGuardStep, headMovedError, isHeadMoved } from './head-guard.js';

describe('the head guard of an append', () => {
  it('publishes onto the head an unguarded append finds, and onto the expected head only', () => {
    expect(headGuardStep(7, undefined)).toBe('publish');
    expect(headGuardStep(7, 7)).toBe('publish');
    expect(headGuardStep(0, 0)).toBe('publish');
  });

  it('probes for its own event when the head moved past the expected one, and refuses a head behind it', () => {
    expect(headGuardStep(8, 7)).toBe('probe');
    expect(headGuardStep(1, 0)).toBe('probe');
    expect(headGuardStep(6, 7)).toBe('refuse');
    expect(headGuardStep(0, 3)).toBe('refuse');
  });

  it('takes a chain seq as expectedHeadSeq, and nothing else (E_INPUT)', () => {
    expect(checkExpectedHeadSeq({})).toBeUndefined();
    expect(checkExpectedHeadSeq({ expectedHeadSeq: 0 })).toBe(0);
    expect(checkExpectedHeadSeq({ expectedHeadSeq: 12 })).toBe(12);
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60]) {
      expect(() => checkExpectedHeadSeq({ expectedHeadSeq: bad })).toThrow(expect.objectContaining({ code: 'E_INPUT' }) as Error);
    }
  });

  it('fails with E_CONFLICT head_moved, naming both heads, and recognises only that conflict', () => {
    const error = headMovedError('run_abc', 9, 7);
    expect(isCairnError(error) && error.toBody()).toEqual({
      code: 'E_CONFLICT',
      message: 'chain run_abc moved: its head is seq 9, not the expected 7',
      details: { chainId: 'run_abc', reason: HEAD_MOVED, expectedHeadSeq: 7, headSeq: 9 },
    });
    expect(isHeadMoved(error)).toBe(true);
    expect(isHeadMoved(new CairnError('E_CONFLICT', 'kept moving', { attempts: 32 }))).toBe(false);
    expect(isHeadMoved(new CairnError('E_UNAVAILABLE', 'down', { reason: HEAD_MOVED }))).toBe(false);
    expect(isHeadMoved(new Error('head_moved'))).toBe(false);
  });
});
