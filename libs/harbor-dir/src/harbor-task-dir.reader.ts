import { CairnError, HarborTaskSubmissionSchema, inputIssues, MAX_HARBOR_TASK_BYTES, MAX_HARBOR_TASK_FILES } from '@cairn/contracts';
import type { HarborTaskSubmission } from '@cairn/contracts';
import { lstat, readdir, readFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { harborTaskFromFiles } from '@cairn/harbor';
import type { HarborLimits, HarborTask, TaskFile } from '@cairn/harbor';

/*
 * Reads a task directory from disk into the files harborTaskFromFiles takes: the CLI (which builds
 * the environment from the directory itself) and the SDKs (which send the files over REST). Only
 * regular files and directories: a symlink, a device or a socket in the task is E_INPUT.
 */

function inputError(message: string, details: Record<string, unknown> = {}): CairnError {
  return new CairnError('E_INPUT', message, details);
}

async function kind(path: string): Promise<'file' | 'directory' | 'other' | 'missing'> {
  const info = await lstat(path).catch(() => null);
  if (info === null) return 'missing';
  return info.isFile() ? 'file' : info.isDirectory() ? 'directory' : 'other';
}

/** A directory with a task.toml (a regular file) is a Harbor task. */
export async function isHarborTaskDir(dir: string): Promise<boolean> {
  return (await kind(join(dir, 'task.toml'))) === 'file';
}

class Budget {
  private files = 0;
  private bytes = 0;
  constructor(private readonly dir: string, private readonly limits: HarborLimits | undefined) {}
  count(size: number): void {
    this.files += 1;
    this.bytes += size;
    if (this.limits === undefined) return;
    if (this.files > this.limits.files) throw inputError(`${this.dir}: more than ${this.limits.files} files; a task may have at most ${this.limits.files}`, { limit: this.limits.files });
    if (this.bytes > this.limits.bytes) throw inputError(`${this.dir}: more than ${this.limits.bytes} bytes of files; a task may have at most ${this.limits.bytes}`, { limit: this.limits.bytes });
  }
}

async function readOne(root: string, relative: string, budget: Budget): Promise<TaskFile> {
  const path = join(root, relative);
  const info = await lstat(path);
  if (!info.isFile()) throw inputError(`${path}: only regular files may be in a task (not a symlink, device or socket)`, { path: relative });
  budget.count(info.size);
  return { path: relative, content: await readFile(path), mode: info.mode & 0o111 ? 0o755 : 0o644 };
}

async function filesUnder(root: string, relative: string, budget: Budget): Promise<TaskFile[]> {
  const dir = join(root, relative);
  const found = await kind(dir);
  if (found === 'missing') return [];
  if (found !== 'directory') throw inputError(`${dir} is not a directory`, { path: relative });
  const out: TaskFile[] = [];
  for (const name of (await readdir(dir)).sort()) {
    const path = `${relative}/${name}`;
    const entry = await kind(join(root, path));
    if (entry === 'directory') out.push(...(await filesUnder(root, path, budget)));
    else if (entry === 'file') out.push(await readOne(root, path, budget));
    else throw inputError(`${join(root, path)}: only files and directories may be in a task's ${relative.split('/')[0] ?? ''}/ (not a symlink, device or socket)`, { path });
  }
  return out;
}

/**
 * The task in `dir`. `environment: 'dockerfile'` reads only environment/Dockerfile (the CLI builds
 * from the directory); `'all'` reads all of environment/ (what is sent over REST). With `limits`,
 * reading stops at the first file past them.
 */
export async function readHarborTaskDirFiles(dir: string, options: { environment: 'dockerfile' | 'all'; limits?: HarborLimits }): Promise<TaskFile[]> {
  const budget = new Budget(dir, options.limits);
  const files: TaskFile[] = [];
  const single = ['task.toml', 'instruction.md', ...(options.environment === 'dockerfile' ? ['environment/Dockerfile'] : [])];
  for (const relative of single) {
    const found = await kind(join(dir, relative));
    if (found === 'missing') throw inputError(`${join(dir, relative)} is missing: a Harbor task has ${relative}`, { path: relative });
    files.push(await readOne(dir, relative, budget));
  }
  for (const part of [...(options.environment === 'all' ? ['environment'] : []), 'tests', 'solution']) files.push(...(await filesUnder(dir, part, budget)));
  return files;
}

/** Reads and checks the task in `dir` (harborTaskFromFiles): what is missing or malformed is E_INPUT naming it. */
export async function readHarborTaskDir(dir: string, options: { environment: 'dockerfile' | 'all'; limits?: HarborLimits } = { environment: 'dockerfile' }): Promise<{ task: HarborTask; files: TaskFile[] }> {
  const files = await readHarborTaskDirFiles(dir, options);
  return { task: harborTaskFromFiles(files, { where: dir, name: basename(dir), ...(options.limits === undefined ? {} : { limits: options.limits }) }), files };
}

/**
 * A task directory as the body of `POST /v1/missions/harbor` (`runs.submitHarborTask` of
 * @cairn/sdk): read within the REST limits and checked by the mapping the gateway runs, so a bad
 * task is E_INPUT here, before anything is sent.
 */
export async function harborTaskSubmission(dir: string, run: { oracle: true } | { agent: string[] }, options: { job?: string } = {}): Promise<HarborTaskSubmission> {
  const limits = { files: MAX_HARBOR_TASK_FILES, bytes: MAX_HARBOR_TASK_BYTES };
  const files = await readHarborTaskDirFiles(dir, { environment: 'all', limits });
  const name = basename(resolve(dir)).replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 128) || 'harbor-task';
  harborTaskFromFiles(files, { where: dir, name, limits });
  const parsed = HarborTaskSubmissionSchema.safeParse({
    files: files.map((file) => ({ path: file.path, content: Buffer.from(file.content).toString('base64'), mode: file.mode })),
    ...('oracle' in run ? { oracle: true } : { agent: run.agent }),
    name,
    ...(options.job === undefined ? {} : { job: options.job }),
  });
  if (!parsed.success) throw inputError(`${dir}: ${inputIssues(parsed.error).map((i) => `${i.path}: ${i.message}`).join('; ')}`);
  return parsed.data;
}
