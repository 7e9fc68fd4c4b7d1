import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import type { SandboxHandle } from '@cairn/sandbox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeOf, sandboxFixture, text } from './sandbox.fixture.js';

/*
 * Secrets in a sandbox (`putSecrets`): files under the /run/secrets tmpfs every sandbox has, root's
 * with the sandbox user's group, 0440 — readable by the sandbox's processes, which can change,
 * add or remove nothing there — written over exec's stdin only, so neither `docker inspect` of the
 * container nor of its execs shows a value.
 */

const fx = sandboxFixture('sec');
const run = promisify(execFile);
let sandbox: SandboxHandle;
/** A value of this test's own. */
const VALUE = `s-${randomBytes(24).toString('base64url')}`;
const OTHER = `o-${randomBytes(24).toString('base64url')}`;

const exec = (argv: string[]) => fx.driver.exec(sandbox, { argv, timeoutMs: 20_000, maxOutputBytes: 1 << 20 });

beforeAll(async () => {
  await fx.ready();
  sandbox = await fx.driver.create(fx.spec());
  await fx.driver.putSecrets(sandbox, [
    { name: 'API_TOKEN', value: new Uint8Array(Buffer.from(VALUE)) },
    { name: 'OTHER_ONE', value: new Uint8Array(Buffer.from(OTHER)) },
  ]);
});

afterAll(async () => {
  await fx.removeLabelled([fx.workerId]);
});

describe('putSecrets', () => {
  it('mounts each secret at /run/secrets/NAME: root-owned, the sandbox group’s, 0440, byte for byte', async () => {
    expect(text((await exec(['cat', '/run/secrets/API_TOKEN'])).stdout)).toBe(VALUE);
    expect(text((await exec(['cat', '/run/secrets/OTHER_ONE'])).stdout)).toBe(OTHER);
    const listing = text((await exec(['ls', '-ln', '/run/secrets'])).stdout);
    expect(listing).toMatch(/-r--r----- +1 +0 +65520 .* API_TOKEN/);
    expect(listing).toMatch(/-r--r----- +1 +0 +65520 .* OTHER_ONE/);
    expect(text((await exec(['stat', '-c', '%a %u %g', '/run/secrets'])).stdout).trim()).toBe('750 0 65520');
  });

  it('lets the sandbox change nothing there: no write, no new file, no chmod, no removal, no rename', async () => {
    for (const argv of [
      ['sh', '-c', 'echo x > /run/secrets/API_TOKEN'],
      ['sh', '-c', 'echo x >> /run/secrets/API_TOKEN'],
      ['touch', '/run/secrets/NEW_ONE'],
      ['chmod', '666', '/run/secrets/API_TOKEN'],
      ['rm', '-f', '/run/secrets/API_TOKEN'],
      ['mv', '/run/secrets/API_TOKEN', '/run/secrets/MOVED'],
      ['chmod', '777', '/run/secrets'],
    ]) {
      expect((await exec(argv)).exitCode, argv.join(' ')).not.toBe(0);
    }
    expect(text((await exec(['cat', '/run/secrets/API_TOKEN'])).stdout)).toBe(VALUE);
  });

  it('is not executable, and is a size-capped tmpfs', async () => {
    const mounts = text((await exec(['cat', '/proc/mounts'])).stdout);
    const line = mounts.split('\n').find((l) => l.split(' ')[1] === '/run/secrets');
    expect(line).toMatch(/^tmpfs \/run\/secrets tmpfs \S*noexec\S*/);
    expect(line).toMatch(/size=2048k/);
  });

  it('never shows a value in the container’s configuration or its execs (docker inspect)', async () => {
    const { stdout } = await run('docker', ['inspect', sandbox.id]);
    // Finished execs leave the container's record; any still listed are inspected too.
    const execIds = (JSON.parse(stdout) as { ExecIDs: string[] | null }[])[0]?.ExecIDs ?? [];
    const seen = [stdout, ...(await Promise.all(execIds.map(async (id) => (await run('docker', ['inspect', id]).catch(() => ({ stdout: '' }))).stdout)))].join('\n');
    expect(seen).toContain('/run/secrets');
    for (const value of [VALUE, OTHER]) {
      expect(seen).not.toContain(value);
      expect(seen).not.toContain(Buffer.from(value).toString('base64').slice(0, 24));
    }
    expect(text((await exec(['sh', '-c', 'env; tr "\\000" "\\n" < /proc/1/environ'])).stdout)).not.toContain(VALUE);
  });

  it('refuses a name that could leave /run/secrets, and a name given twice (E_INPUT, nothing written)', async () => {
    const value = new Uint8Array(Buffer.from(OTHER));
    expect(await codeOf(fx.driver.putSecrets(sandbox, [{ name: '../escape', value }]))).toBe('E_INPUT');
    expect(await codeOf(fx.driver.putSecrets(sandbox, [{ name: 'TWICE', value }, { name: 'TWICE', value }]))).toBe('E_INPUT');
    expect(text((await exec(['ls', '/run/secrets'])).stdout).split('\n').filter(Boolean)).toEqual(['API_TOKEN', 'OTHER_ONE']);
  });
});
