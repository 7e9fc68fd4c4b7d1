import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { runCli } from './program.js';

async function run(...argv: string[]) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const code = await runCli(argv, { stdout, stderr, env: {} });
  const text = (stream: PassThrough) => {
    const chunk = stream.read() as Buffer | null;
    return chunk === null ? '' : chunk.toString('utf8');
  };
  return { code, stdout: text(stdout), stderr: text(stderr) };
}

describe('runCli usage', () => {
  it('prints help listing the commands, exit 0', async () => {
    const { code, stdout } = await run('--help');
    expect(code).toBe(0);
    for (const command of ['up', 'down', 'run', 'status', 'events', 'cancel', 'regrade', 'sandbox', 'verify', 'export', 'images', 'projections']) expect(stdout).toContain(command);
    expect(stdout).toContain('--json');
  });

  it('prints the version, exit 0', async () => {
    const { code, stdout } = await run('--version');
    expect(code).toBe(0);
    expect(stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('with no command prints help and E_INPUT on stderr, exit 2', async () => {
    const { code, stdout, stderr } = await run();
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toContain('Usage: cairn');
    expect(stderr).toContain('error E_INPUT: no command given');
  });

  it('refuses an unknown command with a suggestion, exit 2', async () => {
    const { code, stderr } = await run('verfy', 'x');
    expect(code).toBe(2);
    expect(stderr).toMatch(/^error E_INPUT: unknown command 'verfy'/);
    expect(stderr).toContain('verify');
  });

  it('refuses an unknown option and a missing argument, exit 2', async () => {
    expect((await run('verify', 'f', '--frobnicate')).stderr).toMatch(/^error E_INPUT: unknown option '--frobnicate'/);
    const missing = await run('verify');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^error E_INPUT: missing required argument 'run-id \| file'/);
  });

  it('reports usage errors as JSON on stdout when --json is given', async () => {
    const { code, stdout, stderr } = await run('export', '--json');
    expect(code).toBe(2);
    expect(stderr).toBe('');
    expect(JSON.parse(stdout)).toEqual({
      ok: false,
      error: { code: 'E_INPUT', message: "missing required argument 'chain-id'", details: { reason: 'missingArgument' } },
    });
  });

  it('refuses a bad chain id before connecting to anything, exit 2', async () => {
    const { code, stderr } = await run('export', 'RUN_NOPE');
    expect(code).toBe(2);
    expect(stderr).toMatch(/^error E_INPUT: invalid chain id "RUN_NOPE"/);
  });
});
