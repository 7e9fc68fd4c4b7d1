import { CairnError, ERROR_CODES } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { EXIT_CODE_BY_ERROR, EXIT_FAILED, EXIT_USAGE, toCliFailure, usageError } from './exit-codes.js';

describe('EXIT_CODE_BY_ERROR', () => {
  it('maps every error code of the contracts, and nothing else', () => {
    expect(Object.keys(EXIT_CODE_BY_ERROR).sort()).toEqual([...ERROR_CODES].sort());
  });

  it('makes bad input a usage error (2) and every other failure 1', () => {
    for (const code of ERROR_CODES) {
      expect(EXIT_CODE_BY_ERROR[code], code).toBe(code === 'E_INPUT' ? EXIT_USAGE : EXIT_FAILED);
    }
  });
});

describe('toCliFailure', () => {
  it('keeps an expected error’s code, message and details, without a stack', () => {
    const failure = toCliFailure(new CairnError('E_CHAIN_BROKEN', 'chain broken at seq 3', { firstBadSeq: 3, reason: 'hash_mismatch' }));
    expect(failure).toEqual({
      body: { code: 'E_CHAIN_BROKEN', message: 'chain broken at seq 3', details: { firstBadSeq: 3, reason: 'hash_mismatch' } },
      exitCode: 1,
    });
  });

  it('recognises a CairnError by its code marker, not by instanceof', () => {
    const lookalike = Object.assign(new Error('from another copy'), { cairnErrorCode: 'E_NOT_FOUND', details: undefined, toBody: () => ({ code: 'E_NOT_FOUND', message: 'from another copy' }) });
    expect(toCliFailure(lookalike).body.code).toBe('E_NOT_FOUND');
  });

  it('turns anything unexpected into E_INTERNAL and keeps its stack for debugging', () => {
    const failure = toCliFailure(new TypeError('boom'));
    expect(failure.body).toEqual({ code: 'E_INTERNAL', message: 'boom' });
    expect(failure.exitCode).toBe(EXIT_FAILED);
    expect(failure.stack).toContain('TypeError: boom');
    expect(toCliFailure('a string').body).toEqual({ code: 'E_INTERNAL', message: 'a string' });
  });

  it('makes usage errors E_INPUT with exit 2', () => {
    expect(toCliFailure(usageError('cannot read x: ENOENT', { path: 'x' }))).toEqual({
      body: { code: 'E_INPUT', message: 'cannot read x: ENOENT', details: { path: 'x' } },
      exitCode: EXIT_USAGE,
    });
  });
});
