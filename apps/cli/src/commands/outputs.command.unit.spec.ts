import { describe, expect, it } from 'vitest';
import { encoded, formatArtifactTable, logStreams, parseArtifactPath, parseStep } from './outputs.command.js';

const SHA = 'a'.repeat(64);

describe('cairn logs / artifacts: arguments', () => {
  it('takes a step index 0–63 written plainly, and nothing else', () => {
    expect(parseStep('0')).toBe(0);
    expect(parseStep('63')).toBe(63);
    for (const bad of ['', '-1', '01', '1.5', '64', 'x', ' 1']) expect(() => parseStep(bad), bad).toThrow(/--step takes a step index/);
  });

  it('takes an artifact path with or without its leading slash, and refuses an empty one or one with control characters', () => {
    expect(parseArtifactPath('/out/report.json')).toBe('/out/report.json');
    expect(parseArtifactPath('out/report.json')).toBe('/out/report.json');
    for (const bad of ['', 'out/\0x', 'out/a\nb']) expect(() => parseArtifactPath(bad), JSON.stringify(bad)).toThrow(/invalid artifact path/);
  });

  it('prints both streams apart by default, one of them on stdout when asked', () => {
    expect(logStreams({})).toEqual({ streams: ['stdout', 'stderr'], separate: true });
    expect(logStreams({ stdout: true })).toEqual({ streams: ['stdout'], separate: false });
    expect(logStreams({ stderr: true })).toEqual({ streams: ['stderr'], separate: false });
    expect(logStreams({ stdout: true, stderr: true })).toEqual({ streams: ['stdout', 'stderr'], separate: true });
  });
});

describe('cairn logs / artifacts: output', () => {
  it('puts UTF-8 in JSON as text and anything else as base64, byte for byte', () => {
    expect(encoded(new TextEncoder().encode('héllo\n'))).toEqual({ encoding: 'utf8', content: 'héllo\n' });
    const binary = Uint8Array.from([0xff, 0x00, 0xfe, 0x41]);
    const out = encoded(binary);
    expect(out.encoding).toBe('base64');
    expect(Uint8Array.from(Buffer.from(out.content, 'base64'))).toEqual(binary);
  });

  it('lists each step’s streams and each file, with a missing one said so', () => {
    const table = formatArtifactTable({
      runId: 'run_demo',
      steps: [{ index: 0, name: null, exitCode: 0, stdout: { sha256: SHA, bytes: 12, writtenBytes: 12, truncated: false }, stderr: { sha256: SHA, bytes: 2048, writtenBytes: 2048, truncated: false } }],
      items: [{ path: '/out/report.json', sha256: SHA, bytes: null }],
    });
    expect(table).toMatch(/steps\[0\]\.stdout\s+12 B/);
    expect(table).toMatch(/steps\[0\]\.stderr\s+2\.0 KiB/);
    expect(table).toMatch(/\/out\/report\.json\s+missing/);
    expect(formatArtifactTable({ runId: 'run_demo', steps: [], items: [] })).toBe('no outputs recorded yet');
  });
});
