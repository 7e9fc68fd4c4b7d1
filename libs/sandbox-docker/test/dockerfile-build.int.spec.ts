import { uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUILD_BASES_LABEL, BUILD_DIGEST_LABEL, BUILD_STEP_CPUS, BUILD_STEP_MEMORY_BYTES, buildDockerfileImage, createDockerClient, ensureBusyboxImage, IMAGE_LABEL } from '../src/index.js';

const docker = createDockerClient();
const testLabel = { 'io.cairn.test': uniqueName('dockerfile-build') };

/** Every image this file built carries its own label: removed afterwards, whatever tag it has. */
async function removeOurImages(): Promise<void> {
  const images = await docker.listImages({ filters: { label: [`io.cairn.test=${testLabel['io.cairn.test']}`] } });
  for (const image of images) await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
}

describe('images from Dockerfiles, offline', () => {
  let baseId = '';
  beforeAll(async () => {
    baseId = await ensureBusyboxImage();
  });
  afterAll(removeOurImages);

  it('builds from a local base, labels the image with what it came from, and reuses it for the same digest', async () => {
    const marker = uniqueName('content');
    const dockerfile = 'FROM cairn/sandbox-busybox:1 AS base\nFROM base\nCOPY hello.txt /opt/hello.txt\n';
    const first = await buildDockerfileImage({ dockerfile, extraFiles: [{ path: 'hello.txt', content: marker }], labels: testLabel });
    expect(first.cached).toBe(false);
    expect(first.id).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(first.bases).toEqual([{ ref: 'cairn/sandbox-busybox:1', id: baseId }]);
    expect(first.tag).toBe(`cairn/built:${first.digest.slice(0, 16)}`);
    const labels = (await docker.getImage(first.id).inspect()).Config.Labels;
    expect(labels).toMatchObject({ [IMAGE_LABEL]: 'built', [BUILD_DIGEST_LABEL]: first.digest, [BUILD_BASES_LABEL]: baseId });

    const again = await buildDockerfileImage({ dockerfile, extraFiles: [{ path: 'hello.txt', content: marker }], labels: testLabel });
    expect(again).toMatchObject({ id: first.id, digest: first.digest, cached: true });

    const changed = await buildDockerfileImage({ dockerfile, extraFiles: [{ path: 'hello.txt', content: `${marker}!` }], labels: testLabel });
    expect(changed.cached).toBe(false);
    expect(changed.digest).not.toBe(first.digest);
    expect(changed.id).not.toBe(first.id);
  });

  it('refuses a FROM that is not on this engine before building anything (E_INPUT), and a FROM with a variable', async () => {
    const absent = `cairn/${uniqueName('absent').toLowerCase()}:1`;
    const before = (await docker.listImages({ filters: { label: [`io.cairn.test=${testLabel['io.cairn.test']}`] } })).length;
    await expect(buildDockerfileImage({ dockerfile: `FROM ${absent}\nRUN true\n`, labels: testLabel })).rejects.toMatchObject({ code: 'E_INPUT', details: { image: absent } });
    await expect(buildDockerfileImage({ dockerfile: 'ARG BASE=x\nFROM ${BASE}\n', labels: testLabel })).rejects.toMatchObject({ code: 'E_INPUT' });
    expect((await docker.listImages({ filters: { label: [`io.cairn.test=${testLabel['io.cairn.test']}`] } })).length).toBe(before);
  });

  it('gives RUN steps no network and reports a failing step as the build failure', async () => {
    const dockerfile = 'FROM cairn/sandbox-busybox:1\nUSER 0:0\nRUN ["/bin/sh", "-c", "test ! -e /sys/class/net/eth0"]\nRUN ["/bin/sh", "-c", "exit 3"]\n';
    await expect(buildDockerfileImage({ dockerfile, labels: testLabel })).rejects.toMatchObject({ code: 'E_IMAGE_PULL', message: expect.stringMatching(/exit 3.*non-zero code: 3/) as unknown });
  });
  it('caps every RUN step as a sandbox is capped: 2 GiB of memory, one CPU (cgroup v2 or v1)', async () => {
    // The build succeeds only if its step's cgroup says so.
    const [memory, quota] = [String(BUILD_STEP_MEMORY_BYTES), String(100_000 * BUILD_STEP_CPUS)];
    const check =
      `if [ -e /sys/fs/cgroup/memory.max ]; then test "$(cat /sys/fs/cgroup/memory.max)" = "${memory}" && test "$(cat /sys/fs/cgroup/cpu.max)" = "${quota} 100000"; ` +
      `else test "$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)" = "${memory}" && test "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)" = "${quota}"; fi`;
    const dockerfile = `FROM cairn/sandbox-busybox:1\nRUN ["/bin/sh", "-c", ${JSON.stringify(`${check} && echo ${uniqueName('capped')} > /tmp/capped`)}]\n`;
    await expect(buildDockerfileImage({ dockerfile, labels: testLabel })).resolves.toMatchObject({ cached: false });
  });

  it('stops a build past its time limit (E_TIMEOUT): the engine\'s build container is gone, no image is made of it', async () => {
    const marker = uniqueName('slow').toLowerCase();
    // The LABEL step's layer stays behind as an untagged image (as a failed build's do): labelled for the clean-up.
    const dockerfile = `FROM cairn/sandbox-busybox:1\nLABEL io.cairn.test=${testLabel['io.cairn.test']} io.cairn.test.case=${marker}\nRUN ["/bin/sh", "-c", "sleep 30; echo ${marker}"]\n`;
    const started = Date.now();
    await expect(buildDockerfileImage({ dockerfile, labels: testLabel, timeoutMs: 2000 })).rejects.toMatchObject({ code: 'E_TIMEOUT', message: expect.stringContaining('longer than its limit of 2 s') as unknown });
    expect(Date.now() - started).toBeLessThan(15_000);
    const building = async () => (await docker.listContainers({ all: true })).filter((c) => c.Command.includes(marker));
    await expect.poll(building, { timeout: 20_000, interval: 250 }).toEqual([]);
    // No image was made of it: none carries the digest label the finished build adds.
    expect(await docker.listImages({ filters: { label: [`io.cairn.test.case=${marker}`, BUILD_DIGEST_LABEL] } })).toEqual([]);
  }, 60_000);
});
