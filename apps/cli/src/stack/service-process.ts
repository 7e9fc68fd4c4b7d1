import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CairnError } from '@cairn/contracts';
import type { StackService } from './stack-config.js';
import { logDir } from './stack-file.js';
import type { ServiceRecord } from './stack-file.js';

/** The repository root: src/ and dist/ both sit at apps/cli/<dir>/stack/. */
export const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

/** `apps/<name>/dist/main.js`, the built process of a service. */
export function serviceMain(service: StackService, root = REPO_ROOT): string {
  return join(root, 'apps', service, 'dist', 'main.js');
}

/** Services whose built `main.js` is missing (the workspace needs `npm run build`). */
export function missingBuilds(services: readonly StackService[], root = REPO_ROOT): StackService[] {
  return services.filter((service) => !existsSync(serviceMain(service, root)));
}

/**
 * Whether `pid` is a live process running `main`. A zombie counts as gone, and so does a pid the
 * system has handed to another program since (checked through /proc where there is one).
 */
export function isServiceAlive(pid: number, main?: string): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    // ESRCH: gone. EPERM: it exists but is not ours to signal, so it is not our service either.
    return false;
  }
  if (!existsSync('/proc/self/stat')) return true;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The state follows the parenthesised command name, which may itself contain ") ".
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z' || state === 'X') return false;
    if (main === undefined) return true;
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(main);
  } catch {
    return false;
  }
}

export interface StartServiceOptions {
  service: StackService;
  home: string;
  env: NodeJS.ProcessEnv;
  root?: string;
}

/**
 * Starts one service in the background: its own process group (`detached`), stdout and stderr
 * appended to `logs/<service>.log`, nothing tying it to this CLI, which may exit at once.
 */
export async function startServiceProcess(options: StartServiceOptions): Promise<ServiceRecord> {
  const main = serviceMain(options.service, options.root);
  const log = join(logDir(options.home), `${options.service}.log`);
  const handle = await open(log, 'a', 0o600);
  try {
    const startedAt = new Date().toISOString();
    await handle.write(`--- ${startedAt} starting ${options.service}\n`);
    const child = spawn(process.execPath, [main], {
      cwd: options.root ?? REPO_ROOT,
      env: options.env,
      detached: true,
      stdio: ['ignore', handle.fd, handle.fd],
    });
    const spawned = await Promise.race([once(child, 'spawn').then(() => null), once(child, 'error').then(([error]) => error as Error)]);
    if (spawned !== null || child.pid === undefined) {
      throw new CairnError('E_INTERNAL', `cannot start ${options.service} (${main}): ${spawned?.message ?? 'no pid'}`);
    }
    child.unref();
    return { pid: child.pid, main, log, startedAt };
  } finally {
    await handle.close();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function signal(pid: number, sig: NodeJS.Signals): void {
  // The service leads its own process group; signal the group so nothing it started lingers.
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, sig);
      return;
    } catch {
      // not a group leader (or already gone): try the pid itself
    }
  }
}

export interface StopResult {
  /** Stopped by SIGTERM within the timeout. */
  terminated: number[];
  /** Needed SIGKILL. */
  killed: number[];
}

/** SIGTERM to each, then SIGKILL to what is still running after `timeoutMs`. */
export async function stopProcesses(records: readonly ServiceRecord[], timeoutMs: number): Promise<StopResult> {
  const live = records.filter((r) => isServiceAlive(r.pid, r.main));
  for (const record of live) signal(record.pid, 'SIGTERM');
  const deadline = Date.now() + timeoutMs;
  let waiting = live;
  while (waiting.length > 0 && Date.now() < deadline) {
    await sleep(100);
    waiting = waiting.filter((r) => isServiceAlive(r.pid, r.main));
  }
  for (const record of waiting) signal(record.pid, 'SIGKILL');
  const killDeadline = Date.now() + 5_000;
  while (waiting.some((r) => isServiceAlive(r.pid, r.main)) && Date.now() < killDeadline) await sleep(50);
  const killed = new Set(waiting.map((r) => r.pid));
  return { terminated: live.map((r) => r.pid).filter((pid) => !killed.has(pid)), killed: [...killed] };
}

/** The last `lines` lines of a log, for a message about a service that would not start. */
export async function logTail(path: string, lines = 15): Promise<string> {
  const text = await readFile(path, 'utf8').catch(() => '');
  const marker = text.lastIndexOf('\n--- ');
  const lastStart = marker === -1 ? text : text.slice(marker + 1);
  return lastStart.trimEnd().split('\n').slice(-lines).join('\n');
}
