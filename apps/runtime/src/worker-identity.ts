import { CairnError, WorkerIdSchema } from '@cairn/contracts';
import { randomBytes } from 'node:crypto';
import { readFileSync, unlinkSync } from 'node:fs';
import { mkdir, open, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { workerIdFromHostname } from './worker-id.js';

/** The worker's id, persisted in its state directory, and the lock that makes that directory this process's. */
export interface WorkerIdentity {
  workerId: string;
  stateDir: string;
  /** Whether the id was made on this start (the directory was new). */
  created: boolean;
  /** Releases the lock (also done when the process exits). */
  release(): void;
}

export interface ClaimOptions {
  stateDir: string;
  /** CAIRN_WORKER_ID: names the worker on its first start; must match the directory's after that. */
  configuredId: string | undefined;
  hostname: string;
}

const LOCK_FILE = 'runtime.lock';
const ID_FILE = 'worker-id';

interface LockHolder {
  pid: number;
  /** The holder's start time (`/proc/<pid>/stat` field 22), so a reused pid is not taken for it. */
  started: string | null;
  worker_id?: string;
}

/**
 * Takes the worker's state directory for this process and reads (or, on the first start, makes)
 * the worker id kept there. Two runtimes on one host must never share a worker id — they would
 * share a durable consumer, and each would reap the other's sandboxes as its own orphans — so a
 * directory held by a live runtime refuses the second with E_CONFLICT naming the holder. A lock
 * left by a runtime that died (kill -9) is taken over: its successor reuses its id and reaps
 * what it left. The id is CAIRN_WORKER_ID when set, else the host name with a random suffix.
 */
export async function claimWorkerIdentity(options: ClaimOptions): Promise<WorkerIdentity> {
  const { stateDir } = options;
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  const lockPath = join(stateDir, LOCK_FILE);
  await takeLock(lockPath, stateDir);
  const release = onceReleased(lockPath);
  try {
    const { workerId, created } = await workerIdIn(stateDir, options);
    await writeFile(lockPath, JSON.stringify({ ...self(), worker_id: workerId } satisfies LockHolder), { mode: 0o600 });
    return { workerId, stateDir, created, release };
  } catch (error) {
    release();
    throw error;
  }
}

async function takeLock(lockPath: string, stateDir: string): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const handle = await open(lockPath, 'wx', 0o600);
      try {
        await handle.writeFile(JSON.stringify(self() satisfies LockHolder));
      } finally {
        await handle.close();
      }
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new CairnError('E_INPUT', `CAIRN_WORKER_STATE_DIR ${stateDir}: cannot create its lock: ${(error as Error).message}`);
      }
    }
    // An empty lock is being written by its taker right now: read it again a moment later.
    const holder = (await readHolder(lockPath)) ?? (await new Promise((resolve) => setTimeout(resolve, 100)).then(() => readHolder(lockPath)));
    if (holder !== null && isAlive(holder)) {
      const who = holder.worker_id === undefined ? '' : ` as worker ${holder.worker_id}`;
      throw new CairnError(
        'E_CONFLICT',
        `CAIRN_WORKER_STATE_DIR ${stateDir} is held by a running runtime (pid ${holder.pid}${who}): two runtimes on one host need a state directory each (and so a worker id each)`,
        { stateDir, pid: holder.pid },
      );
    }
    // Left by a runtime that is gone: taken over (one of two racing takers wins the exclusive create).
    await unlink(lockPath).catch(() => undefined);
  }
  throw new CairnError('E_CONFLICT', `CAIRN_WORKER_STATE_DIR ${stateDir}: its lock kept changing while it was taken`);
}

async function workerIdIn(stateDir: string, options: ClaimOptions): Promise<{ workerId: string; created: boolean }> {
  const idPath = join(stateDir, ID_FILE);
  const stored = await readFile(idPath, 'utf8').then(
    (text) => text.trim(),
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return null;
      throw new CairnError('E_INPUT', `cannot read the worker id in ${idPath}: ${error.message}`);
    },
  );
  if (stored !== null) {
    if (!WorkerIdSchema.safeParse(stored).success) throw new CairnError('E_INPUT', `${idPath} does not hold a worker id (lower-case [a-z0-9_.-], at most 64)`);
    if (options.configuredId !== undefined && options.configuredId !== stored) {
      throw new CairnError(
        'E_INPUT',
        `CAIRN_WORKER_ID is ${options.configuredId}, but the state directory ${stateDir} belongs to worker ${stored}: a worker keeps its id (its sandboxes carry it); give another worker its own CAIRN_WORKER_STATE_DIR`,
      );
    }
    return { workerId: stored, created: false };
  }
  const workerId = options.configuredId ?? generatedId(options.hostname);
  const temporary = `${idPath}.${process.pid}.tmp`;
  await writeFile(temporary, `${workerId}\n`, { mode: 0o600 });
  await rename(temporary, idPath);
  return { workerId, created: true };
}

/** The host name's worker id with 8 random hex digits: unique per state directory, recognisable per host. */
export function generatedId(hostname: string): string {
  return `${workerIdFromHostname(hostname).slice(0, 55)}-${randomBytes(4).toString('hex')}`;
}

function self(): LockHolder {
  return { pid: process.pid, started: startTime(process.pid) };
}

function startTime(pid: number): string | null {
  try {
    // Field 22 of /proc/<pid>/stat, counted after the command name (which may hold spaces, in parentheses).
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function isAlive(holder: LockHolder): boolean {
  if (!Number.isInteger(holder.pid) || holder.pid <= 0) return false;
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: alive, another user's.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // A runtime killed -9 whose parent has gone (`cairn up` detaches it) may stay a zombie until
  // someone reaps it: dead all the same, and its lock is taken over.
  if (isZombie(holder.pid)) return false;
  return holder.started === null || startTime(holder.pid) === null || startTime(holder.pid) === holder.started;
}

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X';
  } catch {
    return false;
  }
}

async function readHolder(lockPath: string): Promise<LockHolder | null> {
  try {
    const parsed = JSON.parse(await readFile(lockPath, 'utf8')) as Partial<LockHolder>;
    return typeof parsed.pid === 'number' ? { pid: parsed.pid, started: typeof parsed.started === 'string' ? parsed.started : null, ...(typeof parsed.worker_id === 'string' ? { worker_id: parsed.worker_id } : {}) } : null;
  } catch {
    // Gone, being written, or garbage.
    return null;
  }
}

/** Releases the lock once, if it is still this process's; also on exit (a kill -9 leaves it, to be taken over). */
function onceReleased(lockPath: string): () => void {
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    process.off('exit', release);
    try {
      const holder = JSON.parse(readFileSync(lockPath, 'utf8')) as Partial<LockHolder>;
      if (holder.pid === process.pid) unlinkSync(lockPath);
    } catch {
      // Gone already.
    }
  };
  process.on('exit', release);
  return release;
}
