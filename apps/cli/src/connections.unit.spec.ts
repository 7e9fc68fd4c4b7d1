import { CairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { isPostgresUnreachable, unavailableError, withPostgres, withTimeout } from './connections.js';

const withCode = (code: string) => Object.assign(new Error(`failed: ${code}`), { code });

describe('isPostgresUnreachable', () => {
  it('recognises refused, unreachable, starting-up, missing-database and refused-login errors, also nested', () => {
    for (const code of ['ECONNREFUSED', 'ETIMEDOUT', '57P03', '3D000', '28P01']) expect(isPostgresUnreachable(withCode(code)), code).toBe(true);
    expect(isPostgresUnreachable(new AggregateError([withCode('ECONNREFUSED')]))).toBe(true);
    expect(isPostgresUnreachable(new Error('wrapped', { cause: withCode('EHOSTUNREACH') }))).toBe(true);
  });

  it('leaves other database errors alone', () => {
    expect(isPostgresUnreachable(withCode('42P01'))).toBe(false);
    expect(isPostgresUnreachable(new Error('no code'))).toBe(false);
    expect(isPostgresUnreachable('text')).toBe(false);
  });
});

describe('withPostgres', () => {
  it('turns an unreachable server into E_UNAVAILABLE without the password', async () => {
    const failing = withPostgres('postgres://u:pw@127.0.0.1:1/db', () => Promise.reject(withCode('ECONNREFUSED')));
    await expect(failing).rejects.toMatchObject({ code: 'E_UNAVAILABLE', details: { server: 'PostgreSQL', url: 'postgres://127.0.0.1:1/db' } });
    await expect(failing).rejects.not.toThrow(/pw/);
  });

  it('passes other failures through unchanged, and results back', async () => {
    const other = withCode('42P01');
    await expect(withPostgres('postgres://h/db', () => Promise.reject(other))).rejects.toBe(other);
    await expect(withPostgres('postgres://h/db', () => Promise.resolve(3))).resolves.toBe(3);
  });

  it('counts no answer within the timeout as unreachable', async () => {
    const never = new Promise<never>(() => undefined);
    await expect(withPostgres('postgres://h/db', () => never, 10)).rejects.toMatchObject({ code: 'E_UNAVAILABLE' });
  });
});

describe('withTimeout', () => {
  it('rejects with the given error when the work is slower', async () => {
    await expect(withTimeout(new Promise<never>(() => undefined), 5, () => new Error('too slow'))).rejects.toThrow('too slow');
    await expect(withTimeout(Promise.resolve('done'), 1_000, () => new Error('x'))).resolves.toBe('done');
  });
});

describe('unavailableError', () => {
  it('names the server, the variable and what to start', () => {
    const error = unavailableError('NATS', 'CAIRN_NATS_URL', 'nats://127.0.0.1:4222', new CairnError('E_UNAVAILABLE', 'connection refused'));
    expect(error.message).toBe(
      'cannot reach NATS at nats://127.0.0.1:4222 (CAIRN_NATS_URL): connection refused; start the services with `bash tools/ensure-services.sh` (or point the variable at a running server)',
    );
  });
});
