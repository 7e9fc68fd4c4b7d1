import { CairnError } from '@cairn/contracts';
import type Docker from 'dockerode';
import { createHash } from 'node:crypto';
import { appendFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createDockerClient, engineError, engineStatus } from './docker-client.js';
import { BUILD_DIGEST_LABEL, buildDockerfileImage, type ContextFile } from './dockerfile-build.js';
import { debootstrapImage, dropAptCaches } from './images.js';

/*
 * The images the stack itself runs in (docker-compose.yml, deploy/k8s), built here with no registry
 * (docs/adr/0023-stack-images.md): a Debian base by debootstrap, and on it the services, NATS and
 * PostgreSQL. Each carries `io.cairn.stack=<name>` — never `io.cairn.image`, so no policy or worker
 * takes one for a sandbox image — and the digest of what it was made from, so the same inputs give
 * back the image built before instead of building again.
 */

export const STACK_IMAGE_LABEL = 'io.cairn.stack';
export const STACK_IMAGE_NAMES = ['base', 'services', 'nats', 'postgres'] as const;
export type StackImageName = (typeof STACK_IMAGE_NAMES)[number];

/** The users the stack's containers run as (in the base image's /etc/passwd; no host needs them). */
export const STACK_USERS = Object.freeze({ cairn: { uid: 10001, gid: 10001 }, nats: { uid: 10002, gid: 10002 } });

/** The base's packages: the pinned Node's shared libraries, and TLS roots. */
export const STACK_BASE_PACKAGES = Object.freeze(['ca-certificates', 'libstdc++6']);

/** How the base is made; a change here changes its digest, so it is built again. */
const BASE_RECIPE = 'cairn-stack-base/1';

export interface StackImage {
  name: StackImageName;
  tag: string;
  id: string;
  /** sha256 of what it was made from. */
  digest: string;
  /** Built before from the same digest: only tagged now. */
  cached: boolean;
  durationMs: number;
}

export interface StackBaseOptions {
  docker?: Docker;
  tag: string;
  suite?: string;
  mirror?: string;
  /** Build even when an image of this digest is here. */
  fresh?: boolean;
  labels?: Readonly<Record<string, string>>;
  onProgress?: (line: string) => void;
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function splitTag(tag: string): { repo: string; tag: string } {
  const colon = tag.lastIndexOf(':');
  return colon > tag.lastIndexOf('/') ? { repo: tag.slice(0, colon), tag: tag.slice(colon + 1) } : { repo: tag, tag: 'latest' };
}

/** The stack image of `name` built from `digest`, tagged `tag` (tagged now when it was not); null when there is none. */
async function reuse(docker: Docker, name: StackImageName, digest: string, tag: string): Promise<string | null> {
  let found: Docker.ImageInfo[];
  try {
    found = await docker.listImages({ filters: { label: [`${STACK_IMAGE_LABEL}=${name}`, `${BUILD_DIGEST_LABEL}=${digest}`] } });
  } catch (error) {
    throw engineError(error, 'E_IMAGE_PULL', `looking for a ${name} image built from ${digest.slice(0, 12)}`);
  }
  const image = found[0];
  if (image === undefined) return null;
  if (!(image.RepoTags ?? []).includes(tag)) {
    const { repo, tag: version } = splitTag(tag);
    await docker
      .getImage(image.Id)
      .tag({ repo, tag: version })
      .catch((error: unknown) => {
        throw engineError(error, 'E_IMAGE_PULL', `tagging ${image.Id} as ${tag}`);
      });
  }
  return image.Id;
}

/** The base's root file system, finished: Debian's full sources (security updates included) and the stack's users. */
async function finishBase(rootfs: string, suite: string, mirror: string): Promise<void> {
  await writeFile(
    join(rootfs, 'etc/apt/sources.list'),
    `deb ${mirror} ${suite} main\ndeb ${mirror} ${suite}-updates main\ndeb ${mirror.replace(/\/debian\/?$/, '/debian-security')} ${suite}-security main\n`,
  );
  const { cairn, nats } = STACK_USERS;
  await appendFile(join(rootfs, 'etc/passwd'), `cairn:x:${cairn.uid}:${cairn.gid}:cairn:/app:/usr/sbin/nologin\nnats:x:${nats.uid}:${nats.gid}:nats:/nonexistent:/usr/sbin/nologin\n`);
  await appendFile(join(rootfs, 'etc/group'), `cairn:x:${cairn.gid}:\nnats:x:${nats.gid}:\n`);
  await dropAptCaches(rootfs);
}

/**
 * The stack's Debian base: `debootstrap --variant=minbase` with STACK_BASE_PACKAGES, imported with the
 * stack's label and the digest of its recipe (suite, mirror, packages). Needs root and Debian's mirror;
 * a minute or two cold, nothing when an image of the same digest is here.
 */
export async function buildStackBaseImage(options: StackBaseOptions): Promise<StackImage> {
  const started = performance.now();
  const docker = options.docker ?? createDockerClient();
  const suite = options.suite ?? 'bookworm';
  const mirror = options.mirror ?? 'http://deb.debian.org/debian';
  const digest = sha256Hex(JSON.stringify({ recipe: BASE_RECIPE, suite, mirror, packages: [...STACK_BASE_PACKAGES].sort(), users: STACK_USERS }));
  const done = (id: string, cached: boolean): StackImage => ({ name: 'base', tag: options.tag, id, digest, cached, durationMs: Math.round(performance.now() - started) });
  if (options.fresh !== true) {
    const existing = await reuse(docker, 'base', digest, options.tag);
    if (existing !== null) return done(existing, true);
  }
  const labels = { ...options.labels, [STACK_IMAGE_LABEL]: 'base', [BUILD_DIGEST_LABEL]: digest };
  const built = await debootstrapImage({
    docker,
    tag: options.tag,
    suite,
    mirror,
    packages: STACK_BASE_PACKAGES,
    finish: (rootfs) => finishBase(rootfs, suite, mirror),
    changes: ['ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'ENV LANG=C.UTF-8', 'CMD ["bash"]', ...Object.entries(labels).map(([k, v]) => `LABEL ${k}=${v}`)],
    ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
  });
  return done(built.id, false);
}

export interface StackDockerfileOptions {
  docker?: Docker;
  name: Exclude<StackImageName, 'base'>;
  tag: string;
  /** The Dockerfile's text; its FROM must be an image on this engine (the base). */
  dockerfile: string;
  contextDir?: string;
  extraFiles?: readonly ContextFile[];
  /** RUN steps reach the network (PostgreSQL's packages). */
  network?: boolean;
  labels?: Readonly<Record<string, string>>;
  onProgress?: (line: string) => void;
}

/**
 * A stack image from a Dockerfile on the base, through the local engine (`buildDockerfileImage`): the
 * context's digest — which includes the base's id, so a new base means a new image — is its cache key.
 */
export async function buildStackDockerfileImage(options: StackDockerfileOptions): Promise<StackImage> {
  const docker = options.docker ?? createDockerClient();
  const previous = await docker
    .getImage(options.tag)
    .inspect()
    .then((info) => info.Id, () => null);
  const built = await buildDockerfileImage({
    docker,
    dockerfile: options.dockerfile,
    ...(options.contextDir === undefined ? {} : { contextDir: options.contextDir }),
    ...(options.extraFiles === undefined ? {} : { extraFiles: options.extraFiles }),
    ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
    tag: options.tag,
    kindLabels: { [STACK_IMAGE_LABEL]: options.name },
    ...(options.labels === undefined ? {} : { labels: options.labels }),
    network: options.network === true,
  });
  // The image the tag named before a rebuild is left untagged: it goes, unless a container uses it.
  if (previous !== null && previous !== built.id) {
    const stale = await docker.getImage(previous).inspect().catch(() => null);
    if (stale !== null && (stale.RepoTags ?? []).length === 0) await docker.getImage(previous).remove({ force: false }).catch(() => undefined);
  }
  return { name: options.name, tag: built.tag, id: built.id, digest: built.digest, cached: built.cached, durationMs: built.durationMs };
}

export interface StackImageInfo {
  id: string;
  name: string;
  tags: string[];
  sizeBytes: number;
  createdAt: string;
}

/** The stack images on this engine (those labelled `io.cairn.stack`), optionally only those with `labels` too. */
export async function listStackImages(docker: Docker = createDockerClient(), labels: Readonly<Record<string, string>> = {}): Promise<StackImageInfo[]> {
  try {
    const images = await docker.listImages({ filters: { label: [STACK_IMAGE_LABEL, ...Object.entries(labels).map(([k, v]) => `${k}=${v}`)] } });
    return images.map((image) => ({
      id: image.Id,
      name: image.Labels?.[STACK_IMAGE_LABEL] ?? 'unknown',
      tags: (image.RepoTags ?? []).filter((t) => t !== '<none>:<none>'),
      sizeBytes: image.Size,
      createdAt: new Date(image.Created * 1000).toISOString(),
    }));
  } catch (error) {
    throw engineError(error, 'E_INTERNAL', 'listing the stack images');
  }
}

/**
 * Removes the stack images (optionally only those with `labels`), the images built on the base first;
 * an image a container still uses is refused by the engine, and that is E_CONFLICT naming it.
 */
export async function removeStackImages(docker: Docker = createDockerClient(), labels: Readonly<Record<string, string>> = {}): Promise<StackImageInfo[]> {
  const images = await listStackImages(docker, labels);
  const ordered = [...images.filter((i) => i.name !== 'base'), ...images.filter((i) => i.name === 'base')];
  for (const image of ordered) {
    try {
      await docker.getImage(image.id).remove({ force: true, noprune: false });
    } catch (error) {
      if (engineStatus(error) === 404) continue;
      if (engineStatus(error) === 409) throw new CairnError('E_CONFLICT', `image ${image.tags[0] ?? image.id} is in use by a container: remove the stack first (docker-compose down)`, { image: image.id });
      throw engineError(error, 'E_INTERNAL', `removing ${image.tags[0] ?? image.id}`);
    }
  }
  return ordered;
}
