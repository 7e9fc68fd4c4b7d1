import { describe, expect, it } from 'vitest';
import { JsonLogger } from './json-logger.js';

describe('JsonLogger', () => {
  it('writes one JSON Lines line per record: U+2028/U+2029 escaped, so a line reader sees it whole', () => {
    const lines: string[] = [];
    const logger = new JsonLogger('runtime', 'info', (line) => lines.push(line));
    logger.write('info', 'step a\u2028b', { argv: ['echo', 'x\u2029y\rz'] });
    logger.write('debug', 'not at this level');
    expect(lines).toHaveLength(1);
    const line = lines[0]!;
    expect(line.indexOf('\n')).toBe(line.length - 1);
    expect(line).not.toMatch(/[\r\u2028\u2029]/);
    expect(JSON.parse(line)).toMatchObject({ level: 'info', service: 'runtime', msg: 'step a\u2028b', argv: ['echo', 'x\u2029y\rz'] });
  });
});
