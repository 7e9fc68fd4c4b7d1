import { CairnError } from '@cairn/contracts';
import { FILE_ROOTS } from './tmpfs-layout.js';

/** Control characters and backslashes: legal in Linux names, trouble in every log and tool. */
const badCharacter = (segment: string): boolean =>
  [...segment].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f || ch === '\\');

/**
 * Checks that `path` is absolute, normalised (no empty, `.` or `..` segments, no trailing `/`)
 * and under one of `roots`; `allowRoot` admits the root itself (`/out`). Anything else is
 * `E_INPUT`: a file may never land on, or be read from, a path outside the writable mounts.
 */
export function assertSandboxPath(path: string, options: { roots?: readonly string[]; allowRoot?: boolean } = {}): string {
  const roots = options.roots ?? FILE_ROOTS;
  const root = roots.find((r) => path === r || path.startsWith(`${r}/`));
  const fail = (why: string): never => {
    throw new CairnError('E_INPUT', `${JSON.stringify(path)} is not a usable sandbox path: ${why}`, { path });
  };
  if (root === undefined) return fail(`it must be under ${roots.join(', ')}`);
  if (path === root) return options.allowRoot === true ? path : fail('it must name something below the mount');
  if (path.length > 1024) return fail('it is longer than 1024 characters');
  for (const segment of path.slice(root.length + 1).split('/')) {
    if (segment === '' || segment === '.' || segment === '..') fail('it must be normalised (no empty, . or .. segments)');
    if (badCharacter(segment)) fail('it contains a control character or a backslash');
  }
  return path;
}

/** The name of `path` inside a tar archive extracted at `/`: `/work/a` → `work/a`. */
export function tarEntryName(path: string): string {
  return path.replace(/^\/+/, '');
}

/** The directories between a file root and `path`, outermost first: `/work/a/b/c` → `/work/a`, `/work/a/b`. */
export function parentDirectories(path: string, roots: readonly string[] = FILE_ROOTS): string[] {
  const root = roots.find((r) => path.startsWith(`${r}/`));
  if (root === undefined) return [];
  const segments = path.slice(root.length + 1).split('/').slice(0, -1);
  return segments.map((_, i) => `${root}/${segments.slice(0, i + 1).join('/')}`);
}
