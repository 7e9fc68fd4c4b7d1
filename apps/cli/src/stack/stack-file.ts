import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { CairnError } from '@cairn/contracts';
import { z } from 'zod';
import { STACK_SERVICES } from './stack-config.js';

/*
 * The state directory of a stack (mode 0700): `stack.json` (pids, URL, log paths, the services'
 * configuration; mode 0600), `api-key` (mode 0600), `logs/` (artifacts are in NATS: docs/adr/0021).
 */

export const STACK_FILE = 'stack.json';
export const API_KEY_FILE = 'api-key';
export const LOCK_FILE = 'up.lock';

export const ServiceRecordSchema = z.object({
  pid: z.number().int().positive(),
  /** The file the process runs (`apps/<name>/dist/main.js`): a pid is only ours while it runs this. */
  main: z.string().min(1),
  log: z.string().min(1),
  startedAt: z.string(),
});
export type ServiceRecord = z.infer<typeof ServiceRecordSchema>;

export const StackFileSchema = z.object({
  version: z.literal(1),
  stackId: z.string(),
  url: z.string().min(1),
  /** The MCP gateway's Streamable HTTP endpoint (`…/mcp`); absent in stacks started before it existed. */
  mcpUrl: z.string().min(1).optional(),
  home: z.string(),
  keyFile: z.string(),
  startedAt: z.string(),
  /** The CAIRN_* variables every service was started with (no secrets), so one can be restarted alike. */
  config: z.record(z.string(), z.string()),
  services: z.partialRecord(z.enum(STACK_SERVICES), ServiceRecordSchema),
});
export type StackFile = z.infer<typeof StackFileSchema>;

export function stackFilePath(home: string): string {
  return join(home, STACK_FILE);
}

export function apiKeyPath(home: string): string {
  return join(home, API_KEY_FILE);
}

export function logDir(home: string): string {
  return join(home, 'logs');
}

function errnoCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : undefined;
}

/** Creates the state directory (0700) and its logs directory. */
export async function ensureHome(home: string): Promise<void> {
  await mkdir(logDir(home), { recursive: true, mode: 0o700 });
  await chmod(home, 0o700);
}

/** Writes `content` beside `path` with `mode`, then renames it into place: never half a file. */
export async function writePrivateFile(path: string, content: string, mode = 0o600): Promise<void> {
  const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const handle = await open(temp, 'wx', mode);
  try {
    await handle.writeFile(content, 'utf8');
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}

/** The stack file, or null when no stack was started from this state directory. */
export async function readStackFile(home: string): Promise<StackFile | null> {
  const path = stackFilePath(home);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return null;
    throw new CairnError('E_INPUT', `cannot read ${path}: ${errnoCode(error) ?? String(error)}`, { path });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CairnError('E_INPUT', `${path} is not JSON: remove it (cairn down) and start the stack again`, { path });
  }
  const result = StackFileSchema.safeParse(parsed);
  if (!result.success) throw new CairnError('E_INPUT', `${path} is not a stack file this cairn reads: remove it (cairn down) and start again`, { path });
  return result.data;
}

export async function writeStackFile(home: string, stack: StackFile): Promise<void> {
  await writePrivateFile(stackFilePath(home), `${JSON.stringify(stack, null, 2)}\n`);
}

export async function removeStackFile(home: string): Promise<void> {
  await rm(stackFilePath(home), { force: true });
}

const KEY_PREFIX_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

/**
 * A new admin API key in the gateway's form, `cairn_<8-char public prefix>_<256-bit secret>`;
 * the gateway registers it at start and stores only its hash.
 */
export function newApiKey(random: (size: number) => Buffer = randomBytes): string {
  const prefix = Array.from(random(8), (byte) => KEY_PREFIX_ALPHABET[byte & 31] ?? 'a').join('');
  return `cairn_${prefix}_${random(32).toString('base64url')}`;
}

export async function readApiKey(home: string): Promise<string | null> {
  try {
    const key = (await readFile(apiKeyPath(home), 'utf8')).trim();
    return key === '' ? null : key;
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return null;
    throw new CairnError('E_INPUT', `cannot read ${apiKeyPath(home)}: ${errnoCode(error) ?? String(error)}`);
  }
}

export async function writeApiKey(home: string, key: string): Promise<void> {
  await writePrivateFile(apiKeyPath(home), `${key}\n`);
}

/**
 * Holds `up.lock` while `work` runs, so two `cairn up` on one state directory do not both start
 * a stack. A lock left by a process that is gone is taken over.
 */
export async function withStackLock<T>(home: string, isAlive: (pid: number) => boolean, work: () => Promise<T>): Promise<T> {
  const path = join(home, LOCK_FILE);
  for (let attempt = 0; ; attempt += 1) {
    try {
      const handle = await open(path, 'wx', 0o600);
      await handle.writeFile(String(process.pid));
      await handle.close();
      break;
    } catch (error) {
      if (errnoCode(error) !== 'EEXIST' || attempt > 0) throw error;
      const holder = Number((await readFile(path, 'utf8').catch(() => '')).trim());
      if (Number.isInteger(holder) && holder > 0 && isAlive(holder)) {
        throw new CairnError('E_CONFLICT', `another cairn (pid ${holder}) is starting or stopping this stack (${home})`, { pid: holder });
      }
      await rm(path, { force: true });
    }
  }
  try {
    return await work();
  } finally {
    await rm(path, { force: true });
  }
}
