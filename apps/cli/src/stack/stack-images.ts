import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, cp, link, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CairnError } from '@cairn/contracts';
import type { ContextFile, StackImage } from '@cairn/sandbox-docker';

/*
 * `cairn images build --stack`: the images docker-compose.yml runs, built on this machine with no
 * registry (docs/adr/0023-stack-images.md) — the Debian base (debootstrap), the services (the pinned
 * Node.js from node_modules, the production node_modules, every dist/), NATS (our build of the pinned
 * server) and PostgreSQL (Debian's) — each tagged cairn/<name>:<version>. What is unchanged since the
 * last build is reused: the base by its recipe's digest, the others by their build context's.
 */

export interface StackImagesOptions {
  root: string;
  /** Where the pinned nats-server was built (tools/ensure-compose.sh): <toolsDir>/nats-server/<version>/nats-server. */
  toolsDir: string;
  /** Build the base again even when one of its recipe is here (Debian's updates). */
  fresh: boolean;
  onProgress: (line: string) => void;
  note: (line: string) => void;
}

export interface StackImagesResult {
  version: string;
  images: StackImage[];
  /** The sandbox image the quick start runs in (the stack's runtime starts sandboxes from it). */
  sandbox: { tag: string; id: string };
}

/** Tags: the base and the services carry Cairn's version, NATS its server's, PostgreSQL its major. */
export async function stackImageTags(root: string): Promise<{ version: string; base: string; services: string; nats: string; postgres: string; natsVersion: string }> {
  const version = (JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { version: string }).version;
  const natsVersion = (await readFile(join(root, 'deploy/nats/VERSION'), 'utf8')).trim();
  return { version, natsVersion, base: `cairn/base:${version}`, services: `cairn/services:${version}`, nats: `cairn/nats:${natsVersion.replace(/^v/, '')}`, postgres: 'cairn/postgres:15' };
}

function run(command: string, args: readonly string[], cwd: string, onProgress: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const tail: string[] = [];
    const relay = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line.trim() === '') continue;
        tail.push(line);
        if (tail.length > 20) tail.shift();
        onProgress(line);
      }
    };
    child.stdout.on('data', relay);
    child.stderr.on('data', relay);
    child.once('error', (error) => reject(new CairnError('E_INTERNAL', `cannot run ${command}: ${error.message}`)));
    child.once('close', (code) => (code === 0 ? resolve() : reject(new CairnError('E_INTERNAL', `${command} ${args.join(' ')} failed (exit ${code ?? 'signal'})`, { tail }))));
  });
}

/** The workspaces (libs/*, apps/*, tools) by their directory, relative to the root. */
async function workspaces(root: string): Promise<string[]> {
  const found: string[] = ['tools'];
  for (const parent of ['libs', 'apps']) {
    for (const name of (await readdir(join(root, parent))).sort()) if (existsSync(join(root, parent, name, 'package.json'))) found.push(`${parent}/${name}`);
  }
  return found;
}

/**
 * The services image's context under <root>/.cairn/stack-build/services: the production node_modules
 * (`npm ci --omit=dev`, from npm's cache when it can; made again only when package-lock.json changes),
 * each workspace's package.json and dist/, the Node binary and the runtime's entry script.
 */
async function servicesContext(root: string, onProgress: (line: string) => void, note: (line: string) => void): Promise<string> {
  const dir = join(root, '.cairn', 'stack-build', 'services');
  const marker = join(root, '.cairn', 'stack-build', 'services.lock-sha256');
  const lock = await readFile(join(root, 'package-lock.json'));
  const lockSha = createHash('sha256').update(lock).digest('hex');
  const spaces = await workspaces(root);
  const missing = spaces.filter((ws) => ws !== 'tools' && !existsSync(join(root, ws, 'dist')));
  if (missing.length > 0) throw new CairnError('E_UNAVAILABLE', `not built: ${missing.map((ws) => `${ws}/dist`).join(', ')}; run \`npm run build\` first`, { missing });
  const node = join(root, 'node_modules', 'node', 'bin', 'node');
  if (!existsSync(node)) throw new CairnError('E_UNAVAILABLE', `no pinned Node.js at ${node}: run \`npm ci\` first`);

  const current = await readFile(marker, 'utf8').catch(() => '');
  if (current.trim() !== lockSha || !existsSync(join(dir, 'node_modules'))) {
    note('production node_modules (npm ci --omit=dev, from the npm cache)…');
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await writeFile(join(dir, 'package-lock.json'), lock);
    await copyFile(join(root, 'package.json'), join(dir, 'package.json'));
    for (const ws of spaces) {
      await mkdir(join(dir, ws), { recursive: true });
      await copyFile(join(root, ws, 'package.json'), join(dir, ws, 'package.json'));
    }
    await run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], dir, onProgress);
    await writeFile(marker, `${lockSha}\n`);
  }
  // What changes between builds: every dist/, the package.json files, the binary, the entry script.
  await copyFile(join(root, 'package.json'), join(dir, 'package.json'));
  // The tools workspace was needed by npm ci alone: no process of the stack runs it.
  await rm(join(dir, 'tools'), { recursive: true, force: true });
  for (const ws of spaces.filter((w) => w !== 'tools')) {
    // Everything a workspace has but its sources and build configuration: dist/, package.json, and the
    // data its code reads beside dist/ (the seccomp profiles, the JSON schemas, openapi.json, bin/).
    for (const entry of await readdir(join(dir, ws))) if (entry !== 'node_modules') await rm(join(dir, ws, entry), { recursive: true, force: true });
    for (const entry of await readdir(join(root, ws))) {
      if (WORKSPACE_SOURCES.test(entry)) continue;
      await cp(join(root, ws, entry), join(dir, ws, entry), { recursive: true, verbatimSymlinks: true });
    }
  }
  await rm(join(dir, 'node'), { force: true });
  // A hard link where it can (the same file system), else a copy: 120 MB either way in the image.
  await link(node, join(dir, 'node')).catch(() => copyFile(node, join(dir, 'node')));
  await copyFile(join(root, 'deploy/images/runtime-entry.sh'), join(dir, 'runtime-entry.sh'));
  return dir;
}

/** What of a workspace stays out of the image: sources, tests, build configuration (agent/: the exec agent's C source; its binary is in dist/). */
const WORKSPACE_SOURCES = /^(src|test|agent|node_modules|tsconfig.*\.json|vite\.config\..*|index\.html|README\.md|.*\.tsbuildinfo)$/;

async function contextFile(path: string, name: string, mode = 0o644): Promise<ContextFile> {
  return { path: name, content: await readFile(path), mode };
}

/** The NATS image's context: the binary and every configuration under deploy/nats (cluster/ included). */
async function natsContext(root: string, binary: string): Promise<ContextFile[]> {
  const files: ContextFile[] = [await contextFile(binary, 'nats-server', 0o755)];
  for (const sub of ['', 'cluster']) {
    const dir = join(root, 'deploy/nats', sub);
    for (const name of (await readdir(dir)).sort()) if (name.endsWith('.conf')) files.push(await contextFile(join(dir, name), sub === '' ? `nats/${name}` : `nats/${sub}/${name}`));
  }
  return files;
}

async function dockerfile(root: string, name: string, base: string): Promise<string> {
  return (await readFile(join(root, 'deploy/images', `${name}.Dockerfile`), 'utf8')).replace('{{base}}', base);
}

/** Builds (or finds) every stack image and the busybox sandbox image. */
export async function buildStackImages(options: StackImagesOptions): Promise<StackImagesResult> {
  const { buildStackBaseImage, buildStackDockerfileImage, ensureBusyboxImage, BUSYBOX_IMAGE_TAG } = await import('@cairn/sandbox-docker');
  const tags = await stackImageTags(options.root);
  const natsBinary = join(options.toolsDir, 'nats-server', tags.natsVersion, 'nats-server');
  if (!(await stat(natsBinary).then((s) => s.isFile(), () => false))) {
    throw new CairnError('E_UNAVAILABLE', `no nats-server ${tags.natsVersion} at ${natsBinary}: run \`bash tools/ensure-compose.sh\` (it builds it from the Go module proxy)`, { path: natsBinary });
  }
  const progress = options.onProgress;
  const images: StackImage[] = [];

  options.note(`${tags.base} (debootstrap of Debian bookworm; minutes the first time)…`);
  const base = await buildStackBaseImage({ tag: tags.base, fresh: options.fresh, onProgress: progress });
  images.push(base);
  // The base's id in every context: a new base is a new digest, so nothing stale is reused.
  const baseMarker: ContextFile = { path: '.cairn-build/base-id', content: `${base.id}\n` };

  options.note(`${tags.nats}…`);
  images.push(
    await buildStackDockerfileImage({ name: 'nats', tag: tags.nats, dockerfile: await dockerfile(options.root, 'nats', tags.base), extraFiles: [baseMarker, ...(await natsContext(options.root, natsBinary))], onProgress: progress }),
  );
  options.note(`${tags.postgres} (Debian's postgresql-15)…`);
  images.push(
    await buildStackDockerfileImage({
      name: 'postgres',
      tag: tags.postgres,
      dockerfile: await dockerfile(options.root, 'postgres', tags.base),
      extraFiles: [baseMarker, await contextFile(join(options.root, 'deploy/images/postgres-entry.sh'), 'postgres-entry.sh', 0o755)],
      network: true,
      onProgress: progress,
    }),
  );
  options.note(`${tags.services}…`);
  const context = await servicesContext(options.root, progress, options.note);
  images.push(await buildStackDockerfileImage({ name: 'services', tag: tags.services, dockerfile: await dockerfile(options.root, 'services', tags.base), contextDir: context, extraFiles: [baseMarker], onProgress: progress }));

  const sandbox = await ensureBusyboxImage();
  return { version: tags.version, images, sandbox: { tag: BUSYBOX_IMAGE_TAG, id: sandbox } };
}
