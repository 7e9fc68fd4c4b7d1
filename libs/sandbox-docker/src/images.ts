import { CairnError, isCairnError } from '@cairn/contracts';
import type Docker from 'dockerode';
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { access, appendFile, constants, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { DEFAULT_SANDBOX_USER, type SandboxUser } from './container-config.js';
import { createDockerClient, engineError, engineStatus } from './docker-client.js';
import { tarBytes } from './file-transfer.js';
import { elfNeedsLoader } from './static-elf.js';

/*
 * Sandbox images built on this machine, without a registry (`docker pull` fails here). The
 * policy's allowlist names images by id (`imageDigest`), which a rebuild with other content changes.
 */

/** Every Cairn image carries this label; its value is the image's kind. */
export const IMAGE_LABEL = 'io.cairn.image';
export const BUSYBOX_IMAGE_TAG = 'cairn/sandbox-busybox:1';
export const DEBIAN_IMAGE_TAG = 'cairn/sandbox-debian:1';

const IMAGE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const FOREVER = '2147483647';

/**
 * The busybox applets linked in the minimal image: a userland for scripts, archives, hashes and
 * text, and nothing for mounting, networking, logins or devices.
 */
export const BUSYBOX_APPLETS = Object.freeze([
  '[', '[[', 'ash', 'awk', 'base64', 'basename', 'bunzip2', 'bzcat', 'bzip2', 'cat', 'chmod', 'cmp', 'cp', 'cut',
  'date', 'dd', 'df', 'diff', 'dirname', 'du', 'echo', 'egrep', 'env', 'expr', 'false', 'fgrep', 'find', 'fold',
  'grep', 'gunzip', 'gzip', 'head', 'hexdump', 'id', 'kill', 'ln', 'ls', 'md5sum', 'mkdir', 'mkfifo', 'mktemp',
  'mv', 'nl', 'nproc', 'od', 'paste', 'patch', 'printf', 'ps', 'pwd', 'readlink', 'realpath', 'rev', 'rm', 'rmdir',
  'sed', 'seq', 'setsid', 'sh', 'sha1sum', 'sha256sum', 'sha512sum', 'sleep', 'sort', 'split', 'stat', 'strings',
  'tac', 'tail', 'tar', 'tee', 'test', 'timeout', 'touch', 'tr', 'true', 'truncate', 'uname', 'uniq', 'unxz',
  'unzip', 'usleep', 'wc', 'which', 'whoami', 'xargs', 'xxd', 'xz', 'xzcat', 'yes', 'zcat',
]);

export const DEFAULT_DEBIAN_PACKAGES = Object.freeze(['python3', 'python3-pytest', 'git', 'ca-certificates']);

export interface BuiltImage {
  tag: string;
  /** The image id (`sha256:…`): what an allowlist pins. */
  id: string;
  durationMs: number;
}

export interface CairnImage {
  id: string;
  tags: string[];
  kind: string;
  createdAt: string;
  sizeBytes: number;
}

export interface ImageBuildOptions {
  docker?: Docker;
  tag?: string;
  user?: SandboxUser;
  /** Progress lines (build output, debootstrap's log) as they come. */
  onProgress?: (line: string) => void;
}

export interface BusyboxImageOptions extends ImageBuildOptions {
  /** A statically linked busybox (Debian's `busybox-static`); found on the usual paths when absent. */
  busyboxPath?: string;
}

export interface DebianImageOptions extends ImageBuildOptions {
  suite?: string;
  mirror?: string;
  packages?: readonly string[];
  /** Where the temporary root file system is made (removed afterwards). Default: the OS temp dir. */
  workDir?: string;
}

const run = promisify(execFile);

function imageBuildError(message: string, details: Record<string, unknown> = {}): CairnError {
  return new CairnError('E_IMAGE_PULL', message, details);
}

function passwd(user: SandboxUser): string {
  return ['root:x:0:0:root:/root:/sbin/nologin', `sandbox:x:${user.uid}:${user.gid}:sandbox:/work:/bin/sh`, 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin', ''].join('\n');
}

function group(user: SandboxUser): string {
  return ['root:x:0:', `sandbox:x:${user.gid}:`, 'nogroup:x:65534:', ''].join('\n');
}

async function findBusybox(explicit: string | undefined): Promise<string> {
  const candidates = explicit === undefined ? ['/bin/busybox', '/usr/bin/busybox', '/usr/sbin/busybox'] : [explicit];
  for (const path of candidates) {
    try {
      await access(path, constants.X_OK);
      return path;
    } catch {
      // try the next one
    }
  }
  throw imageBuildError('no busybox binary found: install Debian\'s busybox-static (apt-get install busybox-static)', { candidates });
}

/** Reads a JSON-lines progress stream from the engine; throws on the first error it reports. */
async function followProgress(stream: NodeJS.ReadableStream, onProgress: ((line: string) => void) | undefined): Promise<Record<string, unknown>[]> {
  const messages: Record<string, unknown>[] = [];
  let buffered = '';
  for await (const chunk of stream) {
    buffered += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    let newline: number;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (line === '') continue;
      const message = JSON.parse(line) as Record<string, unknown>;
      messages.push(message);
      if (typeof message.error === 'string') throw imageBuildError(`the engine failed to build the image: ${message.error}`);
      const text = typeof message.stream === 'string' ? message.stream : typeof message.status === 'string' ? message.status : '';
      if (text.trim() !== '') onProgress?.(text.trimEnd());
    }
  }
  return messages;
}

async function imageIdOrNull(docker: Docker, tag: string): Promise<string | null> {
  try {
    return (await docker.getImage(tag).inspect()).Id;
  } catch (error) {
    if (engineStatus(error) === 404) return null;
    throw engineError(error, 'E_IMAGE_PULL', `looking up image ${tag}`);
  }
}

/** After a retag, the image the tag used to name is dangling: remove it, unless something uses it. */
async function dropReplaced(docker: Docker, previous: string | null, current: string): Promise<void> {
  if (previous === null || previous === current) return;
  try {
    const info = await docker.getImage(previous).inspect();
    if ((info.RepoTags ?? []).length === 0) await docker.getImage(previous).remove({ force: false, noprune: false });
  } catch {
    // In use by a container, or already gone: either way nothing to do.
  }
}

/**
 * Builds the minimal sandbox image from a static busybox: the applets as symlinks, a `sandbox`
 * user (1000), empty `/work`, `/out` and `/tmp`. Takes about a second. The image is assembled here
 * and loaded (`docker load`), not built: a build stamps the time into the image's config, so every
 * build on a fresh engine would get a new id. Here every byte is fixed — the layer's timestamps,
 * the config's dates — and the same busybox binary gives the same image id on any machine.
 */
export async function buildBusyboxImage(options: BusyboxImageOptions = {}): Promise<BuiltImage> {
  const started = performance.now();
  const docker = options.docker ?? createDockerClient();
  const tag = options.tag ?? BUSYBOX_IMAGE_TAG;
  const user = options.user ?? DEFAULT_SANDBOX_USER;
  const busyboxPath = await findBusybox(options.busyboxPath);
  const binary = await readFile(busyboxPath);
  if (elfNeedsLoader(binary)) {
    throw imageBuildError(`${busyboxPath} is dynamically linked; install Debian's busybox-static (apt-get install busybox-static)`, { busyboxPath });
  }
  const available = new Set((await run(busyboxPath, ['--list'])).stdout.split('\n').map((s) => s.trim()));
  const applets = BUSYBOX_APPLETS.filter((applet) => available.has(applet));

  const root = { uid: 0, gid: 0, mtime: new Date(0) };
  const layer = await tarBytes((pack) => {
    for (const dir of ['bin', 'etc', 'usr', 'usr/bin', 'work', 'out']) pack.entry({ ...root, name: dir, type: 'directory', mode: 0o755 });
    pack.entry({ ...root, name: 'tmp', type: 'directory', mode: 0o1777 });
    pack.entry({ ...root, name: 'bin/busybox', mode: 0o755 }, binary);
    for (const applet of applets) pack.entry({ ...root, name: `bin/${applet}`, type: 'symlink', linkname: 'busybox', mode: 0o777 });
    pack.entry({ ...root, name: 'usr/bin/env', type: 'symlink', linkname: '/bin/busybox', mode: 0o777 });
    pack.entry({ ...root, name: 'etc/passwd', mode: 0o644 }, passwd(user));
    pack.entry({ ...root, name: 'etc/group', mode: 0o644 }, group(user));
  });
  const layerDigest = sha256Hex(layer);
  const epoch = '1970-01-01T00:00:00Z';
  const config = Buffer.from(
    JSON.stringify({
      architecture: engineArchitecture(),
      os: 'linux',
      created: epoch,
      config: {
        User: `${user.uid}:${user.gid}`,
        Env: [`PATH=${IMAGE_PATH}`, 'HOME=/work'],
        WorkingDir: '/work',
        Cmd: ['sleep', FOREVER],
        Labels: { [IMAGE_LABEL]: 'busybox' },
      },
      rootfs: { type: 'layers', diff_ids: [`sha256:${layerDigest}`] },
      history: [{ created: epoch, created_by: `cairn images build: busybox ${sha256Hex(binary).slice(0, 12)}, ${applets.length} applets` }],
    }),
  );
  const id = `sha256:${sha256Hex(config)}`;
  const archive = await tarBytes((pack) => {
    pack.entry({ ...root, name: `${layerDigest}/layer.tar`, mode: 0o644 }, layer);
    pack.entry({ ...root, name: `${id.slice(7)}.json`, mode: 0o644 }, config);
    pack.entry({ ...root, name: 'manifest.json', mode: 0o644 }, JSON.stringify([{ Config: `${id.slice(7)}.json`, RepoTags: [tag], Layers: [`${layerDigest}/layer.tar`] }]));
  });

  const previous = await imageIdOrNull(docker, tag);
  try {
    const stream = await docker.loadImage(Readable.from([archive]), { quiet: true });
    await followProgress(stream, options.onProgress);
  } catch (error) {
    throw isCairnError(error) ? error : engineError(error, 'E_IMAGE_PULL', `loading ${tag}`);
  }
  const loaded = await imageIdOrNull(docker, tag);
  if (loaded !== id) throw imageBuildError(`the engine loaded ${tag} as ${loaded ?? 'nothing'}, not ${id}`);
  await dropReplaced(docker, previous, id);
  return { tag, id, durationMs: Math.round(performance.now() - started) };
}

/** The engine's name for this machine's architecture (what a loaded image must declare). */
function engineArchitecture(): string {
  const names: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64' };
  return names[process.arch] ?? process.arch;
}

function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Builds the busybox image unless `tag` already names one; returns its id. */
export async function ensureBusyboxImage(options: BusyboxImageOptions = {}): Promise<string> {
  const docker = options.docker ?? createDockerClient();
  const existing = await imageIdOrNull(docker, options.tag ?? BUSYBOX_IMAGE_TAG);
  return existing ?? (await buildBusyboxImage({ ...options, docker })).id;
}

function spawnLogged(command: string, args: readonly string[], onProgress: ((line: string) => void) | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const tail: string[] = [];
    const relay = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line.trim() === '') continue;
        tail.push(line);
        if (tail.length > 20) tail.shift();
        onProgress?.(line);
      }
    };
    child.stdout.on('data', relay);
    child.stderr.on('data', relay);
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) resolve();
      else reject(imageBuildError(`${command} failed (exit ${code ?? 'signal'})`, { tail }));
    });
  });
}

/** Unmounts whatever a failed debootstrap left mounted under `dir`, deepest first. */
async function unmountUnder(dir: string): Promise<void> {
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
  const points = mountinfo
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const point of points) await run('umount', ['-l', point]).catch(() => undefined);
  const left = (await readFile('/proc/self/mountinfo', 'utf8').catch(() => '')).split('\n').some((line) => (line.split(' ')[4] ?? '').startsWith(`${dir}/`));
  if (left) throw imageBuildError(`file systems are still mounted under ${dir}; not removing it`, { dir });
}

async function finishDebianRootfs(rootfs: string, user: SandboxUser): Promise<void> {
  const passwdText = await readFile(join(rootfs, 'etc/passwd'), 'utf8');
  if (!passwdText.split('\n').some((line) => line.split(':')[2] === String(user.uid))) {
    await appendFile(join(rootfs, 'etc/passwd'), `sandbox:x:${user.uid}:${user.gid}:sandbox:/work:/bin/sh\n`);
  }
  const groupText = await readFile(join(rootfs, 'etc/group'), 'utf8');
  if (!groupText.split('\n').some((line) => line.split(':')[2] === String(user.gid))) {
    await appendFile(join(rootfs, 'etc/group'), `sandbox:x:${user.gid}:\n`);
  }
  for (const dir of ['work', 'out']) await mkdir(join(rootfs, dir), { recursive: true, mode: 0o755 });
  await dropAptCaches(rootfs);
}

/** Package caches of a debootstrapped root file system: megabytes no container needs. */
export async function dropAptCaches(rootfs: string): Promise<void> {
  for (const dir of ['var/cache/apt/archives', 'var/lib/apt/lists']) {
    const entries = await readdir(join(rootfs, dir)).catch(() => [] as string[]);
    for (const entry of entries) if (entry !== 'partial' && entry !== 'lock') await rm(join(rootfs, dir, entry), { recursive: true, force: true });
  }
}

function splitTag(tag: string): { repo: string; tag: string } {
  const colon = tag.lastIndexOf(':');
  return colon > tag.lastIndexOf('/') ? { repo: tag.slice(0, colon), tag: tag.slice(colon + 1) } : { repo: tag, tag: 'latest' };
}

/**
 * Builds a Debian image with real tools (python3, pytest, git): `debootstrap --variant=minbase`
 * into a temporary directory, then `docker import` with the same user setup as the busybox
 * image. Needs root, `debootstrap` and Debian's mirror; takes minutes, so only on request.
 */
export async function buildDebianImage(options: DebianImageOptions = {}): Promise<BuiltImage> {
  const user = options.user ?? DEFAULT_SANDBOX_USER;
  return debootstrapImage({
    ...options,
    packages: options.packages ?? DEFAULT_DEBIAN_PACKAGES,
    finish: (rootfs) => finishDebianRootfs(rootfs, user),
    changes: [`USER ${user.uid}:${user.gid}`, `ENV PATH=${IMAGE_PATH}`, 'ENV HOME=/work', 'WORKDIR /work', `CMD ["sleep", "${FOREVER}"]`, `LABEL ${IMAGE_LABEL}=debian`],
  });
}

/**
 * `debootstrap --variant=minbase` of `packages` into a temporary directory, `finish` over the root
 * file system, then `docker import` with `changes` (Dockerfile instructions: USER, ENV, LABEL, …).
 * Needs root, `debootstrap` and Debian's mirror. The Debian sandbox image and the stack's base image
 * (stack-images.ts) are both made this way.
 */
export async function debootstrapImage(
  options: DebianImageOptions & { packages: readonly string[]; changes: readonly string[]; finish: (rootfs: string) => Promise<void>; tag?: string },
): Promise<BuiltImage> {
  const started = performance.now();
  const docker = options.docker ?? createDockerClient();
  const tag = options.tag ?? DEBIAN_IMAGE_TAG;
  const packages = options.packages;
  if (process.getuid?.() !== 0) throw imageBuildError(`building ${tag} needs root (debootstrap)`);
  if (!packages.every((p) => /^[a-z0-9][a-z0-9+.-]+$/.test(p))) throw new CairnError('E_INPUT', 'package names must be Debian package names', { packages });
  const work = await mkdtemp(join(options.workDir ?? tmpdir(), 'cairn-debian-'));
  const rootfs = join(work, 'rootfs');
  const previous = await imageIdOrNull(docker, tag);
  try {
    const args = ['--variant=minbase', `--include=${packages.join(',')}`, options.suite ?? 'bookworm', rootfs, options.mirror ?? 'http://deb.debian.org/debian'];
    await spawnLogged('debootstrap', args, options.onProgress).catch((error: unknown) => {
      if ((error as { code?: unknown }).code === 'ENOENT') throw imageBuildError('debootstrap is not installed (apt-get install debootstrap)');
      throw error;
    });
    await options.finish(rootfs);

    const archive = spawn('tar', ['-C', rootfs, '--numeric-owner', '-c', '-f', '-', '.'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const archived = new Promise<void>((resolve, reject) => {
      archive.once('error', reject);
      archive.once('close', (code) => (code === 0 ? resolve() : reject(imageBuildError(`tar of the root file system failed (exit ${code ?? 'signal'})`))));
    });
    archive.stderr.resume();
    const { repo, tag: version } = splitTag(tag);
    try {
      const stream = await docker.importImage(archive.stdout, { repo, tag: version, changes: [...options.changes] });
      await Promise.all([followProgress(stream, options.onProgress), archived]);
    } catch (error) {
      archive.kill('SIGKILL');
      throw engineError(error, 'E_IMAGE_PULL', `importing ${tag}`);
    }
  } finally {
    await unmountUnder(work);
    await rm(work, { recursive: true, force: true });
  }
  const id = await imageIdOrNull(docker, tag);
  if (id === null) throw imageBuildError(`the import of ${tag} reported no image`);
  await dropReplaced(docker, previous, id);
  return { tag, id, durationMs: Math.round(performance.now() - started) };
}

/** The id (`sha256:…`) of a local image; `E_IMAGE_PULL` when the engine does not have it. */
export async function imageDigest(tag: string, docker: Docker = createDockerClient()): Promise<string> {
  const id = await imageIdOrNull(docker, tag);
  if (id === null) throw imageBuildError(`image ${tag} is not on this engine (build it: cairn images build)`, { image: tag });
  return id;
}

/** The Cairn sandbox images on this engine (those with the `io.cairn.image` label). */
export async function listCairnImages(docker: Docker = createDockerClient()): Promise<CairnImage[]> {
  try {
    const images = await docker.listImages({ filters: { label: [IMAGE_LABEL] } });
    return images.map((image) => ({
      id: image.Id,
      tags: (image.RepoTags ?? []).filter((t) => t !== '<none>:<none>'),
      kind: image.Labels?.[IMAGE_LABEL] ?? 'unknown',
      createdAt: new Date(image.Created * 1000).toISOString(),
      sizeBytes: image.Size,
    }));
  } catch (error) {
    throw engineError(error, 'E_INTERNAL', 'listing Cairn images');
  }
}
