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

  it('takes its replicas from CAIRN_NATS_REPLICAS and refuses a stream with others, naming the setting', () => {
    const three = resolveCommandBusOptions({ replicas: 3 });
    expect(commandStreamConfig(resolveCommandBusOptions()).num_replicas).toBe(1);
    expect(commandStreamConfig(three).num_replicas).toBe(3);
    expect(commandStreamProblems(commandStreamConfig(three), three)).toEqual([]);
    expect(commandStreamProblems({ ...commandStreamConfig(three), num_replicas: 1 }, three)).toEqual([
      'num_replicas is 1, not the 3 CAIRN_NATS_REPLICAS asks for (scale it with `nats stream edit CAIRN_COMMANDS --replicas 3`, or set CAIRN_NATS_REPLICAS=1)',
    ]);
    expect(commandStreamProblems({ ...commandStreamConfig(three), persist_mode: 'async' }, three)).toEqual([
      'persist_mode is async: a command would be acknowledged before it is written',
    ]);
    expect(() => resolveCommandBusOptions({ replicas: 0 })).toThrow(/replicas/);
  });
});
