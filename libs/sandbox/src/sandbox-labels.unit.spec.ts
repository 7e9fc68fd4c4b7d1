import { describe, expect, it } from 'vitest';
import { containerName, LABEL_KEYS, parseContainerName, sandboxLabels, workerLabelFilters } from './sandbox-labels.js';

describe('sandbox labels', () => {
  it('marks the container as Cairn’s, its worker’s, its chain’s and (when warm) its pool’s', () => {
    expect(sandboxLabels({ workerId: 'w1', chainId: 'run_abc' })).toEqual({
      'io.cairn.managed': '1',
      'io.cairn.worker': 'w1',
      'io.cairn.chain': 'run_abc',
    });
    expect(sandboxLabels({ workerId: 'w1', chainId: 'sbx_x', pool: 'py' })[LABEL_KEYS.pool]).toBe('py');
  });

  it('filters on both the managed and the worker label', () => {
    expect(workerLabelFilters('w-7')).toEqual(['io.cairn.managed=1', 'io.cairn.worker=w-7']);
  });
});

describe('container names', () => {
  it('derive from the chain id and the instance', () => {
    expect(containerName('run_abc', 1)).toBe('cairn-run_abc-1');
    expect(containerName('sbx_a-b_c', 12)).toBe('cairn-sbx_a-b_c-12');
  });

  it('parse back, with or without Docker’s leading slash, even when the chain id has dashes', () => {
    expect(parseContainerName('cairn-run_abc-1')).toEqual({ chainId: 'run_abc', instance: 1 });
    expect(parseContainerName('/cairn-run_a-2-3')).toEqual({ chainId: 'run_a-2', instance: 3 });
    for (const other of ['cairn-run_abc', 'cairn-job_abc-1', 'other-run_abc-1', 'cairn-run_ABC-1', 'cairn-run_abc-0']) {
      expect(parseContainerName(other)).toBeNull();
    }
  });

  it('refuse what is not a chain id or an instance number', () => {
    expect(() => containerName('job_1', 1)).toThrow(RangeError);
    expect(() => containerName('run_a', 0)).toThrow(RangeError);
  });
});
