import { CairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { engineError, isEngineUnreachable } from './docker-client.js';
import { dockerTimestamp } from './limit-probe.js';

describe('engine errors', () => {
  it('are E_RUNTIME_ABSENT whenever no engine answered', () => {
    const refused = Object.assign(new Error('connect ENOENT /var/run/docker.sock'), { code: 'ENOENT' });
    expect(isEngineUnreachable(refused)).toBe(true);
    expect(engineError(refused, 'E_SANDBOX_START', 'creating').code).toBe('E_RUNTIME_ABSENT');
  });

  it('carry the engine’s message and status otherwise, and let a CairnError through', () => {
    const conflict = Object.assign(new Error('(HTTP code 409) unexpected'), { statusCode: 409, json: { message: 'name in use' } });
    const mapped = engineError(conflict, 'E_SANDBOX_START', 'creating x');
    expect([mapped.code, mapped.message, mapped.details?.status]).toEqual(['E_SANDBOX_START', 'creating x: name in use', 409]);
    const own = new CairnError('E_INPUT', 'bad');
    expect(engineError(own, 'E_INTERNAL', 'x')).toBe(own);
  });
});

describe('dockerTimestamp', () => {
  it('writes epoch ms as seconds.nanoseconds, as the engine reads it', () => {
    expect(dockerTimestamp(1_700_000_000_123)).toBe('1700000000.123000000');
    expect(dockerTimestamp(1_700_000_000_005)).toBe('1700000000.005000000');
  });
});
