import { afterEach, describe, expect, it } from 'vitest';
import { JsonLogger, setLogContext } from './json-logger.js';

function capture(level: ConstructorParameters<typeof JsonLogger>[1] = 'info') {
  const lines: string[] = [];
  const logger = new JsonLogger('runtime', level, (line) => lines.push(line));
  const records = () => lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  return { lines, logger, records };
}

describe('JsonLogger (pino)', () => {
  afterEach(() => setLogContext(null));

  it('writes one JSON Lines line per record: U+2028/U+2029 escaped, so a line reader sees it whole', () => {
    const { lines, logger } = capture();
    logger.write('info', 'step a\u2028b', { argv: ['echo', 'x\u2029y\rz'] });
    logger.write('debug', 'not at this level');
    expect(lines).toHaveLength(1);
    const line = lines[0]!;
    expect(line.indexOf('\n')).toBe(line.length - 1);
    expect(line).not.toMatch(/[\r\u2028\u2029]/);
    expect(JSON.parse(line)).toMatchObject({ level: 'info', service: 'runtime', msg: 'step a\u2028b', argv: ['echo', 'x\u2029y\rz'] });
  });

  it('carries ts, level by name, service and msg on every line, and nothing of pino\'s own (pid, hostname, time)', () => {
    const { logger, records } = capture('debug');
    logger.debug('d');
    logger.log('i', 'Ctx');
    logger.warn('w');
    logger.error(new Error('e'));
    logger.fatal('f');
    expect(records().map((r) => r.level)).toEqual(['debug', 'info', 'warn', 'error', 'fatal']);
    for (const record of records()) {
      expect(Object.keys(record).sort()).toEqual(expect.arrayContaining(['level', 'msg', 'service', 'ts']));
      expect(record.ts).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(record).not.toHaveProperty('pid');
      expect(record).not.toHaveProperty('hostname');
      expect(record).not.toHaveProperty('time');
    }
    expect(records()[1]).toMatchObject({ msg: 'i', context: 'Ctx' });
    expect(records()[3]).toMatchObject({ msg: 'e' });
  });

  it('passes every line\'s fields through its filters, the inner one first, before pino writes them', () => {
    const { lines, logger } = capture();
    const scrub = logger
      .filtered((fields) => JSON.parse(JSON.stringify(fields).replaceAll('hunter2', '[REDACTED]')) as Record<string, unknown>)
      .filtered((fields) => ({ ...fields, seen: 'inner' }));
    scrub.write('warn', 'egress', { host: 'hunter2.example', nested: { list: ['hunter2'] } });
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain('hunter2');
    expect(JSON.parse(lines[0]!)).toMatchObject({ host: '[REDACTED].example', nested: { list: ['[REDACTED]'] }, seen: 'inner', service: 'runtime' });
    logger.write('info', 'unfiltered', { host: 'hunter2.example' });
    expect(lines[1]).toContain('hunter2');
  });

  it('adds trace_id and span_id from the log context when one is set', () => {
    const { logger, records } = capture();
    logger.write('info', 'before');
    setLogContext(() => ({ trace_id: '4bf92f3577b34da6a3ce929d0e0e4736', span_id: '00f067aa0ba902b7' }));
    logger.filtered((fields) => fields).write('info', 'inside');
    setLogContext(() => undefined);
    logger.write('info', 'no span');
    expect(records()[0]).not.toHaveProperty('trace_id');
    expect(records()[1]).toMatchObject({ trace_id: '4bf92f3577b34da6a3ce929d0e0e4736', span_id: '00f067aa0ba902b7' });
    expect(records()[2]).not.toHaveProperty('trace_id');
  });
});
