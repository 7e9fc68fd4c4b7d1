import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { chmod, mkdtemp, readdir, readFile, rm, rmdir, unlink, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { uniqueName } from './infra.js';

const run = promisify(execFile);

/**
 * A second Docker engine of a test's own, user-namespace-remapped (`dockerd --userns-remap=default`),
 * beside the machine's: its own data root, exec root (and so its own containerd), socket, pid file
 * and cgroup parent, all under one temporary directory, and its own network namespace with no bridge
 * and no iptables rules, so it touches nothing of the host's network (not even `docker0`). Needs
 * root, `dockerd` and `unshare`. `stop()` removes everything it made: its containers, the engine and
 * its containerd, mounts, cgroups, the directory, and the `dockremap` account and its subordinate id ranges when this call created them.
 */
export interface SecondDockerEngine {
  socketPath: string;
  /** The remapped host ids of container id 0 (`dockremap`'s first subordinate uid and gid). */
  base: { uid: number; gid: number };
  /** The engine's log so far (for a failing test's message). */
  log(): Promise<string>;
  stop(): Promise<void>;
}

const REMAP_USER = 'dockremap';
const START_TIMEOUT_MS = 60_000;
/**
 * One second engine at a time on this machine (test files run in parallel): they share the
 * `dockremap` account, which the one that created it removes when it stops.
 */
const LOCK_FILE = '/tmp/cairn-second-dockerd.lock';
const LOCK_WAIT_MS = 120_000;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Takes the machine-wide lock: a file holding the holder's pid and a token of its own (test files
 * may share a process); a dead holder's is taken over. The release removes it once, if still its own.
 */
async function lock(): Promise<() => Promise<void>> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  const mine = `${process.pid} ${uniqueName('lock')}`;
  for (;;) {
    try {
      await writeFile(LOCK_FILE, mine, { flag: 'wx' });
      let released = false;
      return async () => {
        if (released) return;
        released = true;
        if ((await readFile(LOCK_FILE, 'utf8').catch(() => '')) === mine) await unlink(LOCK_FILE).catch(() => undefined);
      };
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'EEXIST') throw error;
    }
    const holder = Number((await readFile(LOCK_FILE, 'utf8').catch(() => '0')).split(' ')[0]);
    if (holder > 0 && !alive(holder)) await unlink(LOCK_FILE).catch(() => undefined);
    else if (Date.now() > deadline) throw new Error(`another second Docker engine (pid ${holder}) has held ${LOCK_FILE} for ${LOCK_WAIT_MS} ms`);
    else await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

async function hasAccount(name: string): Promise<boolean> {
  return (await readFile('/etc/passwd', 'utf8')).split('\n').some((line) => line.split(':')[0] === name);
}

/** `name:start:count` of /etc/subuid or /etc/subgid. */
async function subordinateStart(file: string, name: string): Promise<number | null> {
  const line = (await readFile(file, 'utf8').catch(() => '')).split('\n').find((l) => l.split(':')[0] === name);
  return line === undefined ? null : Number(line.split(':')[1]);
}

async function dropSubordinate(file: string, name: string): Promise<void> {
  const text = await readFile(file, 'utf8').catch(() => null);
  if (text === null) return;
  await writeFile(file, text.split('\n').filter((line) => line.split(':')[0] !== name).join('\n'));
}

function ping(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath, path: '/_ping', method: 'GET', timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

/** Pids of processes whose command line mentions `needle` (the engine's containerd, should it outlive the engine). */
async function pidsMentioning(needle: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(needle)) pids.push(Number(entry));
  }
  return pids.filter((pid) => pid !== process.pid);
}

async function mountsUnder(dir: string): Promise<string[]> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  return info
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point === dir || point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

function exited(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

export async function startSecondDockerEngine(): Promise<SecondDockerEngine> {
  if (process.getuid?.() !== 0) throw new Error('a second Docker engine needs root (dockerd)');
  const unlock = await lock();
  try {
    return await start(unlock);
  } catch (error) {
    await unlock();
    throw error;
  }
}

async function start(unlock: () => Promise<void>): Promise<SecondDockerEngine> {
  const createdAccount = !(await hasAccount(REMAP_USER));
  // The remapped root must be able to walk into its data root: 0711, not mkdtemp's 0700.
  const dir = await mkdtemp('/tmp/cairn-dockerd-');
  await chmod(dir, 0o711);
  const socketPath = join(dir, 'docker.sock');
  const cgroupParent = `/${uniqueName('cairn-dockerd').toLowerCase()}`;
  await writeFile(join(dir, 'daemon.json'), '{}\n');
  const logFile = join(dir, 'dockerd.log');
  const out = openSync(logFile, 'a');
  // In a network namespace of its own: a dockerd with `--bridge=none` deletes the host's `docker0` as
  // it starts (moby's removeDefaultBridgeInterface), which would take the machine engine's default
  // bridge away from under it. `unshare` execs, so the child's pid is dockerd's.
  const child = spawn(
    'unshare',
    [
      '--net',
      '--',
      'dockerd',
      '--config-file', join(dir, 'daemon.json'),
      '--data-root', join(dir, 'data'),
      '--exec-root', join(dir, 'exec'),
      '--pidfile', join(dir, 'docker.pid'),
      '-H', `unix://${socketPath}`,
      '--userns-remap=default',
      '--bridge=none',
      '--iptables=false',
      '--ip-masq=false',
      '--cgroup-parent', cgroupParent,
    ],
    { stdio: ['ignore', out, out] },
  );
  closeSync(out);
  const log = () => readFile(logFile, 'utf8').catch(() => '');

  const stop = async (): Promise<void> => {
    if (await ping(socketPath)) {
      const listed = await run('docker', ['-H', `unix://${socketPath}`, 'ps', '-aq']).catch(() => ({ stdout: '' }));
      for (const id of listed.stdout.split('\n').filter((l) => l !== '')) await run('docker', ['-H', `unix://${socketPath}`, 'rm', '-f', id]).catch(() => undefined);
    }
    child.kill('SIGTERM');
    if (!(await exited(child, 30_000))) {
      child.kill('SIGKILL');
      await exited(child, 10_000);
    }
    // Its containerd goes with it; should it not, it is this engine's own (its config is under `dir`).
    for (const pid of await pidsMentioning(join(dir, 'exec'))) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const point of await mountsUnder(dir)) await run('umount', ['-l', point]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    for (const controller of await readdir('/sys/fs/cgroup').catch(() => [] as string[])) {
      await rmdir(join('/sys/fs/cgroup', controller, cgroupParent)).catch(() => undefined);
    }
    if (createdAccount) {
      await run('userdel', [REMAP_USER]).catch(() => undefined);
      await dropSubordinate('/etc/subuid', REMAP_USER);
      await dropSubordinate('/etc/subgid', REMAP_USER);
    }
    await unlock();
  };

  try {
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!(await ping(socketPath))) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the second engine did not come up: ${(await log()).slice(-2000)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const uid = await subordinateStart('/etc/subuid', REMAP_USER);
    const gid = await subordinateStart('/etc/subgid', REMAP_USER);
    if (uid === null || gid === null) throw new Error(`no subordinate ids for ${REMAP_USER} in /etc/subuid and /etc/subgid`);
    return { socketPath, base: { uid, gid }, log, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
