import type { SandboxHandle } from '@cairn/sandbox';
import { uniqueName } from '@cairn/testing';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX_IMAGE_TAG, DEFAULT_SANDBOX_USER, DockerSandboxDriver } from '../src/index.js';
import { codeOf, sandboxFixture, text } from './sandbox.fixture.js';

/*
 * What the host reads out of a sandbox is bounded and checked (getFiles), over the exec agent and
 * over `docker exec`; and secrets reach /run/secrets without anything of the image running as
 * root — shown with an image whose `tar` is a trap.
 */

const fx = sandboxFixture('xfr');
const plain = new DockerSandboxDriver({ docker: fx.docker, execAgent: null });
const OUTPUT_BOUND = 64 * 1024 * 1024;
let viaAgent: SandboxHandle;
let viaExec: SandboxHandle;

const run = (on: DockerSandboxDriver, handle: SandboxHandle, script: string) => on.exec(handle, { argv: ['sh', '-c', script], timeoutMs: 20_000, maxOutputBytes: 1 << 16 });

beforeAll(async () => {
  await fx.ready();
  [viaAgent, viaExec] = await Promise.all([fx.driver.create(fx.spec()), plain.create(fx.spec())]);
});

afterAll(async () => {
  await fx.removeLabelled([fx.workerId]);
});

describe.each([
  ['over the exec agent', () => fx.driver, () => viaAgent],
  ['over docker exec', () => plain, () => viaExec],
])('getFiles %s', (_path, driverOf, handleOf) => {
  it('refuses a 1 TiB sparse file at once (E_BUDGET), keeps nothing, and the sandbox lives on', async () => {
    const [driver, handle] = [driverOf(), handleOf()];
    expect((await run(driver, handle, 'echo small > /out/small.txt && truncate -s 1099511627776 /out/big')).exitCode).toBe(0);
    const started = performance.now();
    const refused = driver.getFiles(handle, ['/out'], OUTPUT_BOUND);
    await expect(refused).rejects.toMatchObject({ cairnErrorCode: 'E_BUDGET', message: expect.stringMatching(/come to 109951162\d{4} bytes/) as string });
    const tookMs = performance.now() - started;
    console.log(`1 TiB sparse output refused in ${Math.round(tookMs)} ms (${_path})`);
    expect(tookMs).toBeLessThan(10_000);
    // Nothing is streaming any more: the sandbox answers, and with the file gone the rest comes out.
    await run(driver, handle, 'rm /out/big');
    const archiving = async () => text((await run(driver, handle, 'ps -o pid,stat,args | grep "[t]ar -c" || true')).stdout).trim();
    expect(await archiving(), 'a tar still listed right after the refusal').toBe('');
    expect((await driver.getFiles(handle, ['/out'], OUTPUT_BOUND)).map((f) => f.path)).toEqual(['/out/small.txt']);
  });

  it('refuses a fifo, a hard link and an unreadable file with E_INPUT naming it, and skips symbolic links', async () => {
    const [driver, handle] = [driverOf(), handleOf()];
    await run(driver, handle, 'rm -rf /out/* && mkdir -p /out/d && echo real > /out/d/real.txt && ln -s /etc/passwd /out/d/passwd && ln -s /proc/1/environ /out/environ');
    expect((await driver.getFiles(handle, ['/out'], OUTPUT_BOUND)).map((f) => f.path)).toEqual(['/out/d/real.txt']);

    await run(driver, handle, 'mkfifo /out/d/pipe');
    const fifo = driver.getFiles(handle, ['/out'], OUTPUT_BOUND);
    await expect(fifo).rejects.toMatchObject({ cairnErrorCode: 'E_INPUT', message: expect.stringContaining('fifo') as string });

    await run(driver, handle, 'rm /out/d/pipe && ln /out/d/real.txt /out/d/again.txt');
    await expect(driver.getFiles(handle, ['/out'], OUTPUT_BOUND)).rejects.toMatchObject({ cairnErrorCode: 'E_INPUT', message: expect.stringContaining('hard link') as string });

    await run(driver, handle, 'rm /out/d/again.txt && echo secret > /out/d/locked && chmod 000 /out/d/locked');
    expect(await codeOf(driver.getFiles(handle, ['/out'], OUTPUT_BOUND))).toMatch(/^E_(INPUT|INTERNAL)$/);
    await run(driver, handle, 'rm -f /out/d/locked');
    expect((await driver.getFiles(handle, ['/out/d', '/out'], OUTPUT_BOUND)).map((f) => f.path)).toEqual(['/out/d/real.txt']);
  });

  it('refuses, from the measure or the archive, files over the bound; a bound met exactly passes', async () => {
    const [driver, handle] = [driverOf(), handleOf()];
    await run(driver, handle, 'rm -rf /out/* && head -c 5000 /dev/zero > /out/a && head -c 12 /dev/zero > /out/b');
    expect(await codeOf(driver.getFiles(handle, ['/out'], 5011))).toBe('E_BUDGET');
    expect((await driver.getFiles(handle, ['/out'], 5012)).map((f) => f.size).sort()).toEqual([12, 5000]);
  });
});

describe('putSecrets with an image whose own tools are traps', () => {
  let trapImage = '';
  const VALUE = `v-${randomBytes(18).toString('base64url')}`;

  beforeAll(async () => {
    // The busybox image with `tar` replaced by a script that would keep (and drop) what it is given.
    const tag = `cairn-test/trap-${uniqueName('img').toLowerCase()}:1`;
    const builder = await fx.docker.createContainer({
      Image: BUSYBOX_IMAGE_TAG,
      Entrypoint: ['sh', '-c', 'rm /bin/tar && printf "#!/bin/sh\\ncat > /tmp/stolen; echo intercepted > /tmp/marker; exit 0\\n" > /bin/tar && chmod 755 /bin/tar'],
      User: '0',
      HostConfig: { NetworkMode: 'none' },
      Labels: { 'io.cairn.worker': fx.workerId },
    });
    await builder.start();
    await builder.wait();
    await builder.commit({ repo: tag.split(':')[0], tag: '1' });
    await builder.remove({ force: true });
    trapImage = tag;
  });

  afterAll(async () => {
    if (trapImage !== '') await fx.docker.getImage(trapImage).remove({ force: true }).catch(() => undefined);
  });

  it('writes them with the agent, never the image’s tar: nothing intercepted, every byte there', async () => {
    const handle = await fx.driver.create({ ...fx.spec(), image: trapImage });
    try {
      // The trap is armed: the image's own tar is the script.
      expect(text((await run(fx.driver, handle, 'head -c 9 /bin/tar')).stdout)).toBe('#!/bin/sh');
      await fx.driver.putSecrets(handle, [{ name: 'TRAP_TOKEN', value: new Uint8Array(Buffer.from(VALUE)) }]);
      expect(text((await run(fx.driver, handle, 'cat /run/secrets/TRAP_TOKEN')).stdout)).toBe(VALUE);
      expect(text((await run(fx.driver, handle, 'stat -c "%a %u %g" /run/secrets/TRAP_TOKEN')).stdout).trim()).toBe(`440 0 ${DEFAULT_SANDBOX_USER.gid}`);
      const looked = await run(fx.driver, handle, 'ls /tmp/marker /tmp/stolen 2>&1; grep -rl "' + VALUE + '" /tmp /work /out 2>/dev/null; true');
      expect(text(looked.stdout)).not.toContain(VALUE);
      expect(text(looked.stdout)).toMatch(/No such file/);
    } finally {
      await fx.driver.destroy(handle);
    }
  });

  it('refuses a sandbox with no agent binary (E_SANDBOX_START) instead of running its tar as root', async () => {
    const handle = await plain.create({ ...fx.spec(), image: trapImage });
    try {
      expect(await codeOf(plain.putSecrets(handle, [{ name: 'TRAP_TOKEN', value: new Uint8Array(Buffer.from(VALUE)) }]))).toBe('E_SANDBOX_START');
      expect((await run(plain, handle, 'ls /tmp/marker')).exitCode).not.toBe(0);
    } finally {
      await plain.destroy(handle);
    }
  });
});
