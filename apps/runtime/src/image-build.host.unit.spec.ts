import type { ImageBuildOp } from '@cairn/contracts';
import type { DockerfileBuild } from '@cairn/sandbox-docker';
import { packBuildContext } from '@cairn/sandbox-sessions';
import { describe, expect, it } from 'vitest';
import { serveImageBuild } from './image-build.host.js';
import type { ImageBuildPorts } from './image-build.host.js';

const NOW = Date.parse('2026-12-04T03:00:00Z');
const packed = packBuildContext('FROM cairn/sandbox-busybox:1\nCOPY a.txt /a.txt\n', [{ path: 'a.txt', content: new TextEncoder().encode('hello') }]);
const OP: ImageBuildOp = {
  op_id: 'b1',
  tenant: 'default',
  requested_by: 'key:k1',
  reply_to: '_INBOX_gateway.r',
  expires_at: new Date(NOW + 60_000).toISOString(),
  dockerfile_bytes: packed.dockerfileBytes,
  files: packed.files,
  bytes: packed.payload.byteLength,
  sha256: packed.sha256,
  data_subject: '_INBOX_gateway.d',
  chunks: 1,
};
const BUILD: DockerfileBuild = { tag: 'cairn/built:0123456789abcdef', id: `sha256:${'c'.repeat(64)}`, digest: 'd'.repeat(64), dockerfileSha256: 'e'.repeat(64), bases: [], cached: false, durationMs: 5 };

function ports(over: Partial<ImageBuildPorts> = {}) {
  const calls = { pulled: 0, built: [] as unknown[], announced: 0 };
  const value: ImageBuildPorts = {
    engine: { buildImage: (options) => { calls.built.push(options); return Promise.resolve(BUILD); } },
    announce: () => { calls.announced += 1; return Promise.resolve(); },
    pull: () => { calls.pulled += 1; return Promise.resolve(packed.payload); },
    workerId: 'w1',
    maxContextBytes: 1024,
    maxTimeoutSeconds: 600,
    now: () => NOW,
    ...over,
  };
  return { value, calls };
}

describe('an image build as the worker serves it', () => {
  it('given a good op, then it builds the unpacked context within the time limit asked for, announces the new image and answers the record', async () => {
    const { value, calls } = ports();
    const built = await serveImageBuild({ ...OP, timeout_seconds: 30 }, value);
    expect(built).toEqual({ tag: BUILD.tag, image_id: BUILD.id, digest: BUILD.digest, dockerfile_sha256: BUILD.dockerfileSha256, bases: [], cached: false, duration_ms: 5, worker_id: 'w1' });
    expect(calls.built).toEqual([expect.objectContaining({ dockerfile: 'FROM cairn/sandbox-busybox:1\nCOPY a.txt /a.txt\n', timeoutMs: 30_000, extraFiles: [expect.objectContaining({ path: 'a.txt', mode: 0o644 })] })]);
    expect(calls.announced).toBe(1);
  });

  it('given an op asking for more time than the worker gives, then the worker\'s limit holds; a cached image is not announced', async () => {
    const { value, calls } = ports({ engine: { buildImage: (options) => { calls.built.push(options); return Promise.resolve({ ...BUILD, cached: true }); } } });
    const built = await serveImageBuild({ ...OP, timeout_seconds: 3600 }, value);
    expect(built.cached).toBe(true);
    expect(calls.built).toEqual([expect.objectContaining({ timeoutMs: 600_000 })]);
    expect(calls.announced).toBe(0);
  });

  it('given a context past the worker\'s limit, then it is E_TOO_LARGE and nothing is fetched or built', async () => {
    const { value, calls } = ports({ maxContextBytes: 16 });
    await expect(serveImageBuild(OP, value)).rejects.toMatchObject({ code: 'E_TOO_LARGE', message: expect.stringContaining('at most 16') as unknown });
    expect(calls).toMatchObject({ pulled: 0, built: [] });
  });

  it('given a worker that builds no images (CAIRN_BUILD_ENABLED=0), then it is E_FORBIDDEN and nothing is fetched or built', async () => {
    const { value, calls } = ports({ enabled: false });
    await expect(serveImageBuild(OP, value)).rejects.toMatchObject({ code: 'E_FORBIDDEN', message: expect.stringContaining('CAIRN_BUILD_ENABLED') as unknown });
    expect(calls).toMatchObject({ pulled: 0, built: [] });
  });

  it('given an op past its caller\'s deadline, then it is E_TIMEOUT and nothing is fetched or built', async () => {
    const { value, calls } = ports();
    await expect(serveImageBuild({ ...OP, expires_at: new Date(NOW - 1).toISOString() }, value)).rejects.toMatchObject({ code: 'E_TIMEOUT' });
    expect(calls).toMatchObject({ pulled: 0, built: [] });
  });

  it('given bytes that are not what the op names, then it is E_INPUT and nothing is built', async () => {
    const { value, calls } = ports({ pull: () => Promise.resolve(new Uint8Array(packed.payload.byteLength)) });
    await expect(serveImageBuild(OP, value)).rejects.toMatchObject({ code: 'E_INPUT' });
    expect(calls.built).toEqual([]);
  });
});
