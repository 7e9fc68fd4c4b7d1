import { RetentionPolicy } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { commandStreamConfig, commandStreamProblems, commandSubject, resolveCommandBusOptions } from './command-stream.config.js';

describe('the command stream', () => {
  it('defaults to CAIRN_COMMANDS on cairn.cmd.>, a work queue bounded to a day', () => {
    const config = commandStreamConfig(resolveCommandBusOptions());
    expect(config).toMatchObject({ name: 'CAIRN_COMMANDS', subjects: ['cairn.cmd.>'], retention: RetentionPolicy.Workqueue, max_age: 86_400_000 * 1e6 });
    expect(commandSubject('cairn', 'submit')).toBe('cairn.cmd.submit');
    expect(commandStreamProblems(config, resolveCommandBusOptions())).toEqual([]);
  });

  it('refuses options and streams that would keep commands forever or elsewhere', () => {
    expect(() => resolveCommandBusOptions({ subjectPrefix: 'Cairn.>' })).toThrow(/subjectPrefix/);
    expect(() => resolveCommandBusOptions({ maxAgeMs: 0 })).toThrow(/maxAgeMs/);
    const options = resolveCommandBusOptions();
    expect(commandStreamProblems({ retention: RetentionPolicy.Limits, subjects: ['other.>'], max_age: 0 }, options)).toHaveLength(3);
  });
});
