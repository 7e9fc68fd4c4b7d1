import { CairnError, isCairnError } from '@cairn/contracts';
import { dockerfileBases } from '@cairn/sandbox';
import type Docker from 'dockerode';
import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createDockerClient, engineError, engineStatus } from './docker-client.js';
import { tarBytes } from './file-transfer.js';
import { IMAGE_LABEL } from './images.js';

/*
 * Sandbox images from Dockerfiles, offline (docs/adr/0018): every FROM must name an image this
 * engine already has, the build never pulls and its RUN steps have no network. The build context
 * is one tar assembled here with fixed metadata, so its sha256 — the build's digest — names the
 * content; an image carrying that digest is reused, not rebuilt.
 */

/** Images Cairn built from a Dockerfile: `io.cairn.image=built`, plus what they were built from. */
export const BUILT_IMAGE_KIND = 'built';
export const BUILD_DIGEST_LABEL = 'io.cairn.build.digest';
export const BUILD_DOCKERFILE_LABEL = 'io.cairn.build.dockerfile-sha256';
export const BUILD_BASES_LABEL = 'io.cairn.build.bases';
/** The repository built images are tagged in unless a tag is given; the default policy admits it by digest. */
export const BUILT_IMAGE_REPOSITORY = 'cairn/built';
/** Where the Dockerfile sits in the context tar: a name no context file is likely to have. */
const DOCKERFILE_ENTRY = '.cairn-build/Dockerfile';

const MAX_DOCKERFILE_BYTES = 1024 * 1024;
const MAX_CONTEXT_BYTES = 512 * 1024 * 1024;
const MAX_CONTEXT_ENTRIES = 100_000;

/** A file added to the context (a Harbor task's tests), beside the context directory's own. */
export interface ContextFile {
  /** Relative, `/`-separated. */
  path: string;
  content: Uint8Array | string;
  mode?: number;
}

export interface DockerfileBuildOptions {
  docker?: Docker;
  /** The Dockerfile's text. */
  dockerfile: string;
  /** The build context directory; absent: an empty context. */
  contextDir?: string;
  extraFiles?: readonly ContextFile[];
  /** Default: `cairn/built:<the digest's first 16 hex digits>`. */
  tag?: string;
  /** Labels of the caller's (a test's run label), on the image besides Cairn's own. */
  labels?: Readonly<Record<string, string>>;
  /**
   * What kind of image it is, as labels: default `io.cairn.image=built` (a sandbox image). The stack's
   * own images (stack-images.ts) carry `io.cairn.stack=<name>` instead: they are never sandboxes.
   */
  kindLabels?: Readonly<Record<string, string>>;
  /** RUN steps reach the network (the stack's PostgreSQL image installs Debian's packages). Default: none. */
  network?: boolean;
  /** The build's time limit: past it the build is stopped (its connection to the engine closed) and E_TIMEOUT thrown. */
  timeoutMs?: number;
  onProgress?: (line: string) => void;
}

export interface BaseImage {
  /** As the FROM line names it. */
  ref: string;
  id: string;
}

export interface DockerfileBuild {
  tag: string;
  /** The image id (`sha256:…`): what a RunSpec and a policy pin. */
  id: string;
  /** sha256 of the context tar (the Dockerfile included): the cache key. */
  digest: string;
  dockerfileSha256: string;
  bases: BaseImage[];
  /** True when an image with this digest was already here: nothing was built. */
  cached: boolean;
  durationMs: number;
}

function inputError(message: string, details: Record<string, unknown> = {}): CairnError {
  return new CairnError('E_INPUT', message, details);
}

function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

async function localImageId(docker: Docker, ref: string): Promise<string | null> {
  try {
    return (await docker.getImage(ref).inspect()).Id;
  } catch (error) {
    if (engineStatus(error) === 404) return null;
    throw engineError(error, 'E_IMAGE_PULL', `looking up image ${ref}`);
  }
}

interface Entry {
  name: string;
  type: 'file' | 'directory' | 'symlink';
  mode: number;
  content?: Buffer;
  linkname?: string;
}

/** The context directory's entries, sorted, with their modes; sockets and devices are refused. */
async function contextEntries(dir: string): Promise<Entry[]> {
  const entries: Entry[] = [];
  let bytes = 0;
  const walk = async (relative: string): Promise<void> => {
    const names = (await readdir(join(dir, relative))).sort();
    for (const name of names) {
      const path = relative === '' ? name : `${relative}/${name}`;
      const info = await lstat(join(dir, path));
      if (entries.length >= MAX_CONTEXT_ENTRIES) throw inputError(`the build context has more than ${MAX_CONTEXT_ENTRIES} entries`, { dir });
      if (info.isDirectory()) {
        entries.push({ name: path, type: 'directory', mode: info.mode & 0o7777 });
        await walk(path);
      } else if (info.isSymbolicLink()) {
        entries.push({ name: path, type: 'symlink', mode: 0o777, linkname: await readlink(join(dir, path)) });
      } else if (info.isFile()) {
        bytes += info.size;
        if (bytes > MAX_CONTEXT_BYTES) throw inputError(`the build context is larger than ${MAX_CONTEXT_BYTES} bytes`, { dir });
        entries.push({ name: path, type: 'file', mode: info.mode & 0o7777, content: await readFile(join(dir, path)) });
      } else {
        throw inputError(`the build context holds ${path}, which is not a file, directory or symlink`, { dir, path });
      }
    }
  };
  try {
    await walk('');
  } catch (error) {
    if (isCairnError(error)) throw error;
    throw inputError(`cannot read the build context ${dir}: ${(error as Error).message}`, { dir });
  }
  return entries;
}

const SAFE_RELATIVE = /^(?!\/)(?!.*(?:^|\/)\.\.?(?:\/|$))[^\0]+$/;

/**
 * The context tar: the directory's entries, the extra files, and the Dockerfile — every entry
 * owned by root with time 0, so the same content always gives the same bytes (and digest).
 */
export async function buildContextTar(dockerfile: string, contextDir: string | undefined, extraFiles: readonly ContextFile[] = []): Promise<Buffer> {
  const entries = contextDir === undefined ? [] : await contextEntries(contextDir);
  const dirs = new Set(entries.filter((e) => e.type === 'directory').map((e) => e.name));
  const extra: Entry[] = [];
  for (const file of extraFiles) {
    if (!SAFE_RELATIVE.test(file.path) || file.path.endsWith('/')) throw inputError(`a context file path must be relative and normalised: ${file.path}`);
    const parts = file.path.split('/');
    for (let i = 1; i < parts.length; i += 1) {
      const parent = parts.slice(0, i).join('/');
      if (!dirs.has(parent)) {
        dirs.add(parent);
        extra.push({ name: parent, type: 'directory', mode: 0o755 });
      }
    }
    extra.push({ name: file.path, type: 'file', mode: file.mode ?? 0o644, content: Buffer.from(file.content) });
  }
  const all = [...entries, ...extra.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))];
  const names = new Set<string>();
  for (const entry of all) {
    if (names.has(entry.name)) throw inputError(`the build context has ${entry.name} twice`);
    names.add(entry.name);
  }
  const owner = { uid: 0, gid: 0, uname: '', gname: '', mtime: new Date(0) };
  return tarBytes((pack) => {
    for (const entry of all) {
      if (entry.type === 'file') pack.entry({ ...owner, name: entry.name, mode: entry.mode }, entry.content ?? Buffer.alloc(0));
      else if (entry.type === 'symlink') pack.entry({ ...owner, name: entry.name, type: 'symlink', linkname: entry.linkname ?? '', mode: 0o777 });
      else pack.entry({ ...owner, name: entry.name, type: 'directory', mode: entry.mode });
    }
    pack.entry({ ...owner, name: '.cairn-build', type: 'directory', mode: 0o755 });
    pack.entry({ ...owner, name: DOCKERFILE_ENTRY, mode: 0o644 }, dockerfile);
  });
}

/** The image already built from `digest`, if this engine has one. */
async function builtWithDigest(docker: Docker, digest: string): Promise<string | null> {
  try {
    const found = await docker.listImages({ filters: { label: [`${BUILD_DIGEST_LABEL}=${digest}`] } });
    return found[0]?.Id ?? null;
  } catch (error) {
    throw engineError(error, 'E_IMAGE_PULL', 'looking for an image built from this digest');
  }
}

function splitTag(tag: string): { repo: string; tag: string } {
  const colon = tag.lastIndexOf(':');
  return colon > tag.lastIndexOf('/') ? { repo: tag.slice(0, colon), tag: tag.slice(colon + 1) } : { repo: tag, tag: 'latest' };
}

/** Reads the engine's JSON-lines build stream; the first error it reports is the build's failure. */
async function followBuild(stream: NodeJS.ReadableStream, onProgress: ((line: string) => void) | undefined): Promise<void> {
  let buffered = '';
  const tail: string[] = [];
  const handle = (line: string) => {
    if (line.trim() === '') return;
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    if (typeof message.error === 'string') throw new CairnError('E_IMAGE_PULL', `the Dockerfile build failed: ${message.error.trim()}`, { tail: tail.slice(-20) });
    const text = typeof message.stream === 'string' ? message.stream : typeof message.status === 'string' ? message.status : '';
    if (text.trim() !== '') {
      tail.push(text.trimEnd());
      onProgress?.(text.trimEnd());
    }
  };
  for await (const chunk of stream) {
    buffered += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    let newline: number;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      handle(buffered.slice(0, newline));
      buffered = buffered.slice(newline + 1);
    }
  }
  handle(buffered);
}

/**
 * Builds a sandbox image from a Dockerfile through the local engine, offline: each FROM must be an
 * image here (else `E_INPUT`, before anything is built), nothing is pulled, RUN steps get no
 * network. The same Dockerfile and context (the same digest) give back the image built before.
 */
/** What one RUN step of a build may use: memory (no swap beyond it) and CPUs, as a quota. */
export const BUILD_STEP_MEMORY_BYTES = 2 * 1024 * 1024 * 1024;
export const BUILD_STEP_CPUS = 1;

export async function buildDockerfileImage(options: DockerfileBuildOptions): Promise<DockerfileBuild> {
  const started = performance.now();
  const docker = options.docker ?? createDockerClient();
  if (Buffer.byteLength(options.dockerfile) > MAX_DOCKERFILE_BYTES) throw inputError(`the Dockerfile is larger than ${MAX_DOCKERFILE_BYTES} bytes`);
  const bases: BaseImage[] = [];
  for (const ref of dockerfileBases(options.dockerfile)) {
    const id = await localImageId(docker, ref);
    if (id === null) {
      throw inputError(`Dockerfile: FROM ${ref} is not an image on this engine; Cairn builds from local images only (no registry): build or load it first`, { image: ref });
    }
    bases.push({ ref, id });
  }
  const context = await buildContextTar(options.dockerfile, options.contextDir, options.extraFiles);
  const digest = sha256Hex(context);
  const dockerfileSha256 = sha256Hex(options.dockerfile);
  const tag = options.tag ?? `${BUILT_IMAGE_REPOSITORY}:${digest.slice(0, 16)}`;
  const done = (id: string, cached: boolean): DockerfileBuild => ({ tag, id, digest, dockerfileSha256, bases, cached, durationMs: Math.round(performance.now() - started) });

  const existing = await builtWithDigest(docker, digest);
  if (existing !== null) {
    if ((await localImageId(docker, tag)) !== existing) {
      const { repo, tag: version } = splitTag(tag);
      await docker.getImage(existing).tag({ repo, tag: version }).catch((error: unknown) => {
        throw engineError(error, 'E_IMAGE_PULL', `tagging ${existing} as ${tag}`);
      });
    }
    return done(existing, true);
  }

  const labels = {
    ...options.labels,
    ...(options.kindLabels ?? { [IMAGE_LABEL]: BUILT_IMAGE_KIND }),
    [BUILD_DIGEST_LABEL]: digest,
    [BUILD_DOCKERFILE_LABEL]: dockerfileSha256,
    [BUILD_BASES_LABEL]: bases.map((b) => b.id).join(','),
  };
  const controller = new AbortController();
  const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => controller.abort(), options.timeoutMs);
  const stopped = new Promise<never>((_, reject) => controller.signal.addEventListener('abort', () => reject(new Error('the build took too long')), { once: true }));
  stopped.catch(() => undefined);
  let stream: NodeJS.ReadableStream | undefined;
  try {
    stream = await Promise.race([
      docker.buildImage(Readable.from([context]), {
        t: tag,
        dockerfile: DOCKERFILE_ENTRY,
        pull: false,
        networkmode: options.network === true ? 'default' : 'none',
        // Each RUN step's container is capped as a sandbox's would be (a build serves remote callers too, ADR 0038).
        memory: BUILD_STEP_MEMORY_BYTES,
        memswap: BUILD_STEP_MEMORY_BYTES,
        cpuperiod: 100_000,
        cpuquota: 100_000 * BUILD_STEP_CPUS,
        rm: true,
        forcerm: true,
        labels,
        abortSignal: controller.signal,
      }),
      stopped,
    ]);
    await Promise.race([followBuild(stream, options.onProgress), stopped]);
  } catch (error) {
    if (controller.signal.aborted) throw new CairnError('E_TIMEOUT', `the Dockerfile build of ${tag} took longer than its limit of ${Math.round((options.timeoutMs ?? 0) / 1000)} s: it was stopped`, { timeoutMs: options.timeoutMs });
    throw isCairnError(error) ? error : engineError(error, 'E_IMAGE_PULL', `building ${tag}`);
  } finally {
    clearTimeout(timer);
    // Closing the connection is what stops the engine's build; after a finished build it is a no-op.
    if (controller.signal.aborted) (stream as { destroy?: () => void } | undefined)?.destroy?.();
  }
  const id = await localImageId(docker, tag);
  if (id === null) throw new CairnError('E_IMAGE_PULL', `the build of ${tag} reported no image`);
  return done(id, false);
}
