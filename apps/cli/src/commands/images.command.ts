import type { Command } from 'commander';
import { dirname } from 'node:path';
import { ImageRefSchema, isCairnError } from '@cairn/contracts';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import type { Output } from '../output.js';
import { readBoundedRegularFile } from '../run-spec.reader.js';

interface BuiltRow {
  tag: string;
  id: string;
  durationMs: number;
}

export function formatBuilt(rows: readonly BuiltRow[], okMark: string): string {
  const width = Math.max(...rows.map((r) => r.tag.length));
  return rows.map((r) => `${okMark}  ${r.tag.padEnd(width)}  ${r.id}  (${(r.durationMs / 1000).toFixed(1)} s)`).join('\n');
}

async function buildFromFile(output: Output, file: string, contextDir: string | undefined, tag: string | undefined): Promise<void> {
  if (tag !== undefined && !ImageRefSchema.safeParse(tag).success) throw usageError(`--tag ${tag} is not an image reference (name:tag)`);
  const dockerfile = (
    await readBoundedRegularFile(file, 1024 * 1024).catch((error: unknown) => {
      throw isCairnError(error) ? error : usageError(`cannot read ${file}: ${(error as Error).message}`, { path: file });
    })
  ).toString('utf8');
  const { buildDockerfileImage } = await import('@cairn/sandbox-docker');
  const progress = output.progress();
  const built = await buildDockerfileImage({
    dockerfile,
    contextDir: contextDir ?? dirname(file),
    ...(tag === undefined ? {} : { tag }),
    onProgress: (line) => progress.update(line.slice(0, 120)),
  });
  progress.done();
  const human = `${output.okMark()}  ${built.tag}  ${built.id}  ${built.cached ? '(cached: built before from this digest)' : `(${(built.durationMs / 1000).toFixed(1)} s)`}\n   digest ${built.digest}  from ${built.bases.map((b) => `${b.ref} ${b.id}`).join(', ') || 'scratch'}`;
  output.result(human, { ok: true, image: built });
}

async function buildStack(output: Output, env: NodeJS.ProcessEnv, fresh: boolean): Promise<void> {
  const { buildStackImages } = await import('../stack/stack-images.js');
  const { REPO_ROOT } = await import('../stack/service-process.js');
  const progress = output.progress();
  const started = performance.now();
  const result = await buildStackImages({
    root: REPO_ROOT,
    toolsDir: env.CAIRN_TOOLS_DIR ?? '/var/cache/cairn',
    fresh,
    onProgress: (line) => progress.update(line.slice(0, 120)),
    note: (line) => {
      progress.done();
      output.note(line);
    },
  });
  progress.done();
  const rows = result.images.map((i) => `${output.okMark()}  ${i.tag.padEnd(24)}  ${i.id}  ${i.cached ? '(cached)' : `(${(i.durationMs / 1000).toFixed(1)} s)`}`);
  rows.push(`${output.okMark()}  ${result.sandbox.tag.padEnd(24)}  ${result.sandbox.id}  (the sandbox image)`);
  output.result(`${rows.join('\n')}\n   ${((performance.now() - started) / 1000).toFixed(1)} s in all; then: docker-compose up -d (docs/operations.md)`, { ok: true, ...result, durationMs: Math.round(performance.now() - started) });
}

export function registerImagesCommand(program: Command, context: CommandContext): void {
  const images = program.command('images').description('the sandbox images, built locally (no registry)');
  images
    .command('build')
    .description('build the default busybox sandbox image (and, with --debian, the Debian one with python3, pytest and git)')
    .option('--debian', 'also build cairn/sandbox-debian:1 with debootstrap (needs root and the Debian mirror; takes minutes)')
    .option('--stack', 'build the images docker-compose.yml runs instead: cairn/base, cairn/services, cairn/nats, cairn/postgres (docs/operations.md)')
    .option('--fresh', "with --stack: make the Debian base again (Debian's updates) even when one of its recipe is here")
    .option('-f, --file <Dockerfile>', 'build an image from this Dockerfile instead: every FROM must be a local image (no registry, no pulls, no network)')
    .option('--context <dir>', 'with --file: the build context (default: the Dockerfile\'s directory)')
    .option('--tag <tag>', 'with --file: the tag (default cairn/built:<digest>)')
    .addHelpText(
      'after',
      "\nThe busybox image comes from this machine's static busybox (apt-get install busybox-static) in about a second;\n" +
        'the same binary gives the same image id. Prints each tag and its id (sha256:…), which a policy can pin.\n' +
        'With --file, builds that Dockerfile through the local engine (docs/missions.md): a FROM naming an image not on\n' +
        'this engine is E_INPUT, before anything is built; the same Dockerfile and context (the same digest) give the image\n' +
        'built before, without building. Prints the tag, the id and whether it was cached.\n' +
        'Exit status: 0 built, 1 the engine or a build tool failed (E_RUNTIME_ABSENT, E_IMAGE_PULL), 2 bad input (E_INPUT).',
    )
    .action(async (options: { debian?: boolean; stack?: boolean; fresh?: boolean; file?: string; context?: string; tag?: string }, command: Command) => {
      const output = context.output(command);
      if (options.fresh === true && options.stack !== true) throw usageError('--fresh goes with --stack');
      if (options.stack === true) {
        if (options.file !== undefined || options.debian === true) throw usageError('--stack builds the stack images alone: not with --file or --debian');
        await buildStack(output, context.env, options.fresh === true);
        return;
      }
      if (options.file !== undefined) {
        await buildFromFile(output, options.file, options.context, options.tag);
        return;
      }
      if (options.context !== undefined || options.tag !== undefined) throw usageError('--context and --tag go with --file');
      const { buildBusyboxImage, buildDebianImage } = await import('@cairn/sandbox-docker');
      const progress = output.progress();
      const onProgress = (line: string) => progress.update(line.slice(0, 120));
      output.note('building cairn/sandbox-busybox:1…');
      const built: BuiltRow[] = [await buildBusyboxImage({ onProgress })];
      progress.done();
      if (options.debian === true) {
        output.note('building cairn/sandbox-debian:1 (debootstrap; this takes minutes)…');
        built.push(await buildDebianImage({ onProgress }));
        progress.done();
      }
      output.result(formatBuilt(built, output.okMark()), { ok: true, images: built });
    });
  images
    .command('list')
    .description('the Cairn sandbox images on this engine, with their ids (with --stack: the stack images)')
    .option('--stack', 'the images docker-compose.yml runs instead')
    .action(async (options: { stack?: boolean }, command: Command) => {
      const output = context.output(command);
      if (options.stack === true) {
        const { listStackImages } = await import('@cairn/sandbox-docker');
        const list = await listStackImages();
        const human = list.length === 0 ? 'no stack images: npx --no-install cairn images build --stack' : list.map((i) => `${(i.tags[0] ?? '<untagged>').padEnd(26)}  ${i.id}  ${i.name}`).join('\n');
        output.result(human, { ok: true, images: list });
        return;
      }
      const { listCairnImages } = await import('@cairn/sandbox-docker');
      const list = await listCairnImages();
      const human = list.length === 0 ? 'no Cairn images: npx --no-install cairn images build' : list.map((i) => `${(i.tags[0] ?? '<untagged>').padEnd(26)}  ${i.id}  ${i.kind}`).join('\n');
      output.result(human, { ok: true, images: list });
    });
  images
    .command('rm')
    .description('remove the stack images (every image labelled io.cairn.stack): cairn/services, cairn/nats, cairn/postgres, cairn/base')
    .requiredOption('--stack', 'the stack images (the only ones this removes; sandbox images stay)')
    .addHelpText('after', '\nAn image a container still uses is refused (E_CONFLICT): `docker-compose down` first. Exit status: 0 removed, 1 refused or failed.')
    .action(async (_options: { stack: boolean }, command: Command) => {
      const output = context.output(command);
      const { removeStackImages } = await import('@cairn/sandbox-docker');
      const removed = await removeStackImages();
      const human = removed.length === 0 ? `${output.okMark()}  no stack images` : removed.map((i) => `${output.okMark()}  removed ${(i.tags[0] ?? '<untagged>').padEnd(26)}  ${i.id}`).join('\n');
      output.result(human, { ok: true, removed });
    });
}
