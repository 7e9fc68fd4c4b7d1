import { BUSYBOX_IMAGE_TAG, createDockerClient, ensureBusyboxImage } from '@cairn/sandbox-docker';
import { uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/sandbox-engine.adapter.js';

/*
 * The engine's answer to "which image is this tag" is reused for a few seconds, but never past a
 * grant that names another id: real engine, a tag of this test's own (removed afterwards).
 */
describe('SandboxEngine.imageId', () => {
  const docker = createDockerClient();
  const repo = `cairn-test-${uniqueName('imgid').toLowerCase().replace(/_/g, '-')}`;
  const tag = `${repo}:1`;
  let busyboxId: string;

  beforeAll(async () => {
    busyboxId = await ensureBusyboxImage({ docker });
    await docker.getImage(BUSYBOX_IMAGE_TAG).tag({ repo, tag: '1' });
  });
  afterAll(async () => {
    await docker.getImage(tag).remove({ noprune: true }).catch(() => undefined);
  });

  it('answers a tag looked up a moment ago from memory, and asks again where a grant names another id', async () => {
    const engine = new SandboxEngine({ socketPath: '/var/run/docker.sock', probes: 'auto' });
    expect(await engine.imageId(tag)).toBe(busyboxId);
    // The tag is gone from the engine now: a lookup that needed the engine would fail.
    await docker.getImage(tag).remove({ noprune: true });
    expect(await engine.imageId(tag)).toBe(busyboxId);
    expect(await engine.imageId(tag, busyboxId)).toBe(busyboxId);
    // A grant of another id is not answered from memory: the engine is asked, and has no such tag.
    await expect(engine.imageId(tag, `sha256:${'0'.repeat(64)}`)).rejects.toMatchObject({ code: 'E_IMAGE_PULL' });
  });
});
