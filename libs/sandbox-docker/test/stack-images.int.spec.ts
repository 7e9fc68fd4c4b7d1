import { uniqueName } from '@cairn/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { BUILD_DIGEST_LABEL, buildStackDockerfileImage, createDockerClient, IMAGE_LABEL, listCairnImages, listStackImages, removeStackImages, STACK_IMAGE_LABEL } from '../src/index.js';

/*
 * The stack's images on the real engine, built from scratch in place of the Debian base (which takes
 * minutes; `npm run test:compose` builds that): labelled as stack images and never as sandbox images,
 * reused by digest, a rebuild's replaced image removed, and removal limited to the labels asked for.
 */

const docker = createDockerClient();
const testLabel = { 'io.cairn.test': uniqueName('stack-images') };
const tag = `cairn/stack-test-${testLabel['io.cairn.test'].toLowerCase().replace(/[^a-z0-9-]/g, '-')}:1`;

describe('stack images', () => {
  afterAll(async () => {
    for (const image of await docker.listImages({ filters: { label: [`io.cairn.test=${testLabel['io.cairn.test']}`] } })) await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
  });

  it('given a Dockerfile, when built twice and then changed, then it is a stack image (not a sandbox image), reused, and the replaced one is gone', async () => {
    const dockerfile = 'FROM scratch\nCOPY marker /marker\n';
    const first = await buildStackDockerfileImage({ name: 'services', tag, dockerfile, extraFiles: [{ path: 'marker', content: 'one' }], labels: testLabel });
    expect(first).toMatchObject({ name: 'services', tag, cached: false });
    const labels = (await docker.getImage(first.id).inspect()).Config.Labels ?? {};
    expect(labels).toMatchObject({ [STACK_IMAGE_LABEL]: 'services', [BUILD_DIGEST_LABEL]: first.digest });
    expect(labels[IMAGE_LABEL]).toBeUndefined();
    expect((await listCairnImages(docker)).map((i) => i.id)).not.toContain(first.id);

    expect(await buildStackDockerfileImage({ name: 'services', tag, dockerfile, extraFiles: [{ path: 'marker', content: 'one' }], labels: testLabel })).toMatchObject({ id: first.id, cached: true });

    const changed = await buildStackDockerfileImage({ name: 'services', tag, dockerfile, extraFiles: [{ path: 'marker', content: 'two' }], labels: testLabel });
    expect(changed.cached).toBe(false);
    expect(changed.id).not.toBe(first.id);
    await expect(docker.getImage(first.id).inspect()).rejects.toMatchObject({ statusCode: 404 });
  });

  it('given stack images of this test and others, when removed by this test\'s label, then only this test\'s go', async () => {
    const listed = await listStackImages(docker, testLabel);
    expect(listed.map((i) => i.name)).toEqual(['services']);
    const everyone = (await listStackImages(docker)).length;
    const removed = await removeStackImages(docker, testLabel);
    expect(removed.map((i) => i.id)).toEqual(listed.map((i) => i.id));
    expect(await listStackImages(docker, testLabel)).toEqual([]);
    expect((await listStackImages(docker)).length).toBe(everyone - removed.length);
  });
});
