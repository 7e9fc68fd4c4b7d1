import { describe, expect, it } from 'vitest';
import { runtimeDurableName, workerIdFromHostname } from './worker-id.js';

describe('workerIdFromHostname', () => {
  it('keeps a plain host name, lower-cased', () => {
    expect(workerIdFromHostname('Sandbox-Host-01.example.net')).toBe('sandbox-host-01.example.net');
  });

  it('replaces what a token cannot hold and trims what it cannot start or end with', () => {
    expect(workerIdFromHostname('_my host!')).toBe('my-host');
    expect(workerIdFromHostname('a'.repeat(80))).toHaveLength(64);
  });

  it('falls back to a fixed id when nothing usable is left', () => {
    expect(workerIdFromHostname('')).toBe('worker');
    expect(workerIdFromHostname('***')).toBe('worker');
  });
});

describe('runtimeDurableName', () => {
  it('is cairn-runtime-<worker id>, without the dots a consumer name cannot hold', () => {
    expect(runtimeDurableName('w1')).toBe('cairn-runtime-w1');
    expect(runtimeDurableName('host.example')).toBe('cairn-runtime-host_example');
  });
});
