import { uniqueName } from '@cairn/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { buildBusyboxImage, createDockerClient, IMAGE_LABEL, imageDigest, listCairnImages } from '../src/index.js';

const docker = createDockerClient();
// A tag of this test's own: the shared cairn/sandbox-busybox:1 is never rebuilt or removed here.
const tag = `cairn-test/${uniqueName('busybox').toLowerCase()}:1`;

afterAll(async () => {
  await docker
    .getImage(tag)
    .remove({ force: true })
    .catch(() => undefined);
});

describe('buildBusyboxImage', () => {
  it('builds a labelled image in seconds, without leaving containers behind, reproducibly', async () => {
    const first = await buildBusyboxImage({ docker, tag });
    expect(first.id).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(first.durationMs).toBeLessThan(30_000);
    expect(await imageDigest(tag, docker)).toBe(first.id);

    const inspect = await docker.getImage(tag).inspect();
    expect(inspect.Config.User).toBe('65520:65520');
    expect(inspect.Config.Labels?.[IMAGE_LABEL]).toBe('busybox');
    expect(inspect.Config.WorkingDir).toBe('/work');
    // Nothing of the time of the build is in the image: its id is the same on any machine, for the same busybox.
    expect(inspect.Created).toBe('1970-01-01T00:00:00Z');

    // The build is reproducible, so sandboxes of other tests running now share this image id: a
    // build's own leftovers are the containers that are not Cairn-managed sandboxes.
    const leftovers = (await docker.listContainers({ all: true, filters: { ancestor: [first.id] } })).filter(
      (c) => c.Labels['io.cairn.managed'] !== '1',
    );
    expect(leftovers).toEqual([]);

    const again = await buildBusyboxImage({ docker, tag });
    expect(again.id).toBe(first.id);

    const listed = await listCairnImages(docker);
    expect(listed.find((image) => image.id === first.id)?.tags).toContain(tag);
  });

  it('answers E_IMAGE_PULL for an image the engine does not have', async () => {
    await expect(imageDigest(`cairn-test/absent-${uniqueName('x').toLowerCase()}:1`, docker)).rejects.toMatchObject({
      cairnErrorCode: 'E_IMAGE_PULL',
    });
  });
});
