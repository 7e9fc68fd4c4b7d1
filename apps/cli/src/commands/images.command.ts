import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';

interface BuiltRow {
  tag: string;
  id: string;
  durationMs: number;
}

export function formatBuilt(rows: readonly BuiltRow[], okMark: string): string {
  const width = Math.max(...rows.map((r) => r.tag.length));
  return rows.map((r) => `${okMark}  ${r.tag.padEnd(width)}  ${r.id}  (${(r.durationMs / 1000).toFixed(1)} s)`).join('\n');
}

export function registerImagesCommand(program: Command, context: CommandContext): void {
  const images = program.command('images').description('the sandbox images, built locally (no registry)');
  images
    .command('build')
    .description('build the default busybox sandbox image (and, with --debian, the Debian one with python3, pytest and git)')
    .option('--debian', 'also build cairn/sandbox-debian:1 with debootstrap (needs root and the Debian mirror; takes minutes)')
    .addHelpText(
      'after',
      "\nThe busybox image comes from this machine's static busybox (apt-get install busybox-static) in about a second;\n" +
        'the same binary gives the same image id. Prints each tag and its id (sha256:…), which a policy can pin.\n' +
        'Exit status: 0 built, 1 the engine or a build tool failed (E_RUNTIME_ABSENT, E_IMAGE_PULL).',
    )
    .action(async (options: { debian?: boolean }, command: Command) => {
      const output = context.output(command);
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
    .description('the Cairn sandbox images on this engine, with their ids')
    .action(async (_options: unknown, command: Command) => {
      const output = context.output(command);
      const { listCairnImages } = await import('@cairn/sandbox-docker');
      const list = await listCairnImages();
      const human = list.length === 0 ? 'no Cairn images: npx --no-install cairn images build' : list.map((i) => `${(i.tags[0] ?? '<untagged>').padEnd(26)}  ${i.id}  ${i.kind}`).join('\n');
      output.result(human, { ok: true, images: list });
    });
}
