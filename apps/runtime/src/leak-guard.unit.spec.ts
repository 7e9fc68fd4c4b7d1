import { OutputScanner } from '@cairn/secrets';
import { JsonLogger } from '@cairn/service-kit';
import { describe, expect, it } from 'vitest';
import { describeLeaks, LeakGuard, leakRedactedFields } from './leak-guard.js';

const VALUE = 'canary-8f3a9c1e77d2';
const scanner = new OutputScanner([{ name: 'TOKEN', value: new Uint8Array(Buffer.from(VALUE)) }]);

describe('LeakGuard', () => {
  it('redacts a receipt’s names and values, notes each finding once, and tells of the first only', () => {
    let told = 0;
    const guard = new LeakGuard(() => scanner, () => told++);
    const fields = guard.receipt('run.executed', { artifact_hashes: { [`/out/${VALUE}`]: 'a'.repeat(64) }, duration_ms: 3 });
    expect(fields).toEqual({ artifact_hashes: { '/out/[REDACTED:TOKEN]': 'a'.repeat(64) }, duration_ms: 3 });
    expect(guard.receipt('egress.denied', { host: `${VALUE}.x`, port: 1 }).host).toBe('[REDACTED:TOKEN].x');
    expect(told).toBe(1);
    expect(guard.seen).toBe(true);
    const leaks = guard.takeUnrecorded();
    expect(leaks.map((l) => [l.where, l.receiptType, l.field, l.inKey])).toEqual([
      ['receipt', 'run.executed', 'artifact_hashes', true],
      ['receipt', 'egress.denied', 'host', false],
    ]);
    expect(guard.takeUnrecorded()).toEqual([]);
    expect(leakRedactedFields(leaks[0]!, 2)).toEqual({ where: 'receipt', pattern: 'secret.plain', count: 1, step_index: 2, receipt_type: 'run.executed', field: 'artifact_hashes', in_key: true, secret: 'TOKEN' });
    expect(describeLeaks(leaks)).toBe('secret TOKEN (secret.plain ×1) in a name in artifact_hashes of run.executed, the host of egress.denied');
  });

  it('redacts what only names findings (secret.redacted, alert.raised) without counting it as a new finding', () => {
    let told = 0;
    const guard = new LeakGuard(() => scanner, () => told++);
    expect(guard.receipt('secret.redacted', { where: 'file', path: `/out/${VALUE}` }).path).toBe('/out/[REDACTED:TOKEN]');
    expect(told).toBe(0);
    expect(guard.seen).toBe(false);
  });

  it('redacts every line a filtered logger writes, and notes it as a log finding', () => {
    const lines: string[] = [];
    const guard = new LeakGuard(() => scanner, () => undefined);
    const logger = new JsonLogger('runtime', 'info', (line) => lines.push(line)).filtered(guard.logFilter);
    logger.write('warn', 'egress refused', { host: `${VALUE}.evil`, nested: { error: `open /work/${VALUE}: denied` } });
    expect(lines.join('')).not.toContain(VALUE);
    expect(JSON.parse(lines[0]!)).toMatchObject({ host: '[REDACTED:TOKEN].evil', nested: { error: 'open /work/[REDACTED:TOKEN]: denied' } });
    expect(guard.takeUnrecorded().map((l) => [l.where, l.field])).toEqual([
      ['log', 'host'],
      ['log', 'nested'],
    ]);
  });

  it('reads the scanner at each use: the run’s own, once its secrets are known', () => {
    let current = new OutputScanner([]);
    const guard = new LeakGuard(() => current, () => undefined);
    expect(guard.text('reply', 'message', VALUE)).toBe(VALUE);
    current = scanner;
    expect(guard.text('reply', 'message', `no ${VALUE}`)).toBe('no [REDACTED:TOKEN]');
  });
});
