import type { Sandbox } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { execExitCode, formatSandboxDetails, formatSandboxTable, parseEnvPair, parseMode, parseSandboxState, parseSecretList, planCopy, sandboxSpecOf } from './sandbox.command.js';

const VIEW: Sandbox = {
  id: 'sbx_abc',
  tenant: 'default',
  state: 'DESTROYED',
  image: 'cairn/sandbox-busybox:1',
  imageId: null,
  caps: { wall_seconds: 60, memory_mib: 64, pids: 64, disk_mib: 256, cpus: 1 },
  network: 'none',
  workerId: 'w1',
  createdAt: '2026-01-01T00:00:00.000Z',
  readyAt: '2026-01-01T00:00:01.000Z',
  expiresAt: '2026-01-01T01:00:00.000Z',
  idleSeconds: 600,
  lastActivityAt: '2026-01-01T00:00:02.000Z',
  operations: 3,
  destroyReason: 'deleted',
  errorCode: null,
  headSeq: 9,
  headHash: 'c'.repeat(64),
  sealed: true,
};

describe('cairn sandbox create options', () => {
  it('become a SandboxSpec the contracts accept', () => {
    expect(sandboxSpecOf({})).toEqual({});
    expect(sandboxSpecOf({ image: 'cairn/sandbox-busybox:1', ttl: '600', memory: '64', cpus: '0.5', secret: ['API_TOKEN'] })).toEqual({
      image: 'cairn/sandbox-busybox:1',
      ttlSeconds: 600,
      caps: { memoryMiB: 64, cpus: 0.5 },
      secrets: ['API_TOKEN'],
    });
  });

  it.each([
    [{ ttl: '0' }, '--ttl'],
    [{ ttl: '1.5' }, '--ttl'],
    [{ ttl: '86401' }, '--ttl'],
    [{ memory: '64MiB' }, '--memory'],
    [{ cpus: '-1' }, '--cpus'],
    [{ cpus: '1e3' }, '--cpus'],
    [{ image: 'UPPER/case' }, 'image'],
    [{ image: 'busybox; rm -rf /' }, 'image'],
  ])('refuses %j naming %s', (options, mentions) => {
    expect(() => sandboxSpecOf(options)).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining(mentions) as string }) as Error);
  });

  it('secret names, env pairs, modes and states are checked', () => {
    expect(parseSecretList('B', parseSecretList('A'))).toEqual(['A', 'B']);
    expect(() => parseSecretList('A', ['A'])).toThrow(/twice/);
    expect(() => parseSecretList('lower')).toThrow(/--secret/);
    expect(parseEnvPair('B=x=y', parseEnvPair('A='))).toEqual({ A: '', B: 'x=y' });
    expect(() => parseEnvPair('NOEQUALS')).toThrow(/--env/);
    expect(() => parseEnvPair('bad-name=1')).toThrow(/--env/);
    expect(() => parseEnvPair('A=2', { A: '1' })).toThrow(/twice/);
    expect(parseMode('0644')).toBe(0o644);
    expect(parseMode('755')).toBe(0o755);
    for (const bad of ['4755', '0x1ff', '999', '']) expect(() => parseMode(bad), bad).toThrow(/--mode/);
    expect(parseSandboxState('ready')).toBe('READY');
    expect(() => parseSandboxState('SEALED')).toThrow(/--state/);
  });
});

describe('cairn sandbox cp', () => {
  it('plans a copy in or out, with - as stdin or stdout', () => {
    expect(planCopy('a.txt', 'sbx_abc:/work/a.txt')).toEqual({ direction: 'in', from: { kind: 'local', path: 'a.txt' }, to: { kind: 'sandbox', sandboxId: 'sbx_abc', path: '/work/a.txt' } });
    expect(planCopy('-', 'sbx_abc:/tmp/x')).toMatchObject({ direction: 'in', from: { kind: 'std' } });
    expect(planCopy('sbx_abc:/out/r.json', '.')).toEqual({ direction: 'out', from: { kind: 'sandbox', sandboxId: 'sbx_abc', path: '/out/r.json' }, to: { kind: 'local', path: '.' } });
    expect(planCopy('sbx_abc:/out/r.json', '-')).toMatchObject({ direction: 'out', to: { kind: 'std' } });
    // A local file whose name merely looks like one: ./ makes it local.
    expect(planCopy('./sbx_abc:/x', 'sbx_abc:/work/x')).toMatchObject({ from: { kind: 'local', path: './sbx_abc:/x' } });
  });

  it.each([
    ['a.txt', 'b.txt', 'needs a sandbox side'],
    ['sbx_abc:/work/a', 'sbx_def:/work/b', 'one sandbox'],
    ['a.txt', 'sbx_abc:/etc/passwd', 'invalid sandbox path'],
    ['a.txt', 'sbx_abc:/work/../etc/passwd', 'invalid sandbox path'],
    ['a.txt', 'sbx_abc:work/a', 'invalid sandbox path'],
    ['a.txt', 'sbx_ABC:/work/a', 'invalid sandbox id'],
    ['sbx_abc:/work', '-', 'invalid sandbox path'],
  ])('refuses %s → %s', (from, to, mentions) => {
    expect(() => planCopy(from, to)).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining(mentions) as string }) as Error);
  });
});

describe('cairn sandbox exec exit status', () => {
  it("is the program's own, and at least 1 when a cap was hit or no status came back", () => {
    const base = { limitHit: null, errorCode: null };
    expect(execExitCode({ ...base, exitCode: 0 })).toBe(0);
    expect(execExitCode({ ...base, exitCode: 42 })).toBe(42);
    expect(execExitCode({ ...base, exitCode: 300 })).toBe(255);
    expect(execExitCode({ ...base, exitCode: null })).toBe(1);
    expect(execExitCode({ exitCode: 137, limitHit: 'E_MEM_LIMIT', errorCode: 'E_MEM_LIMIT' })).toBe(137);
    expect(execExitCode({ exitCode: null, limitHit: 'E_TIMEOUT', errorCode: 'E_TIMEOUT' })).toBe(1);
    expect(execExitCode({ exitCode: 0, limitHit: 'E_DISK_LIMIT', errorCode: 'E_DISK_LIMIT' })).toBe(1);
  });
});

describe('cairn sandbox ls / show formatting', () => {
  it('a table with state and why it ended, and one line per field', () => {
    const table = formatSandboxTable([VIEW, { ...VIEW, id: 'sbx_def', state: 'READY', destroyReason: null }]);
    expect(table.split('\n')[0]).toMatch(/^SANDBOX\s+STATE\s+OPS\s+CREATED\s+EXPIRES\s+IMAGE$/);
    expect(table).toContain('DESTROYED(deleted)');
    expect(table).toMatch(/sbx_def\s+READY\s+3/);
    expect(formatSandboxTable([])).toBe('no sandboxes');
    const details = formatSandboxDetails(VIEW);
    expect(details).toContain('state    DESTROYED (deleted)');
    expect(details).toContain(`chain    9 receipts  head ${'c'.repeat(64)}  sealed`);
    expect(details).toContain('caps     {"wall_seconds":60,"memory_mib":64,"pids":64,"disk_mib":256,"cpus":1}');
  });
});
