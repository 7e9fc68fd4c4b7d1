import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { claimWorkerIdentity } from './worker-identity.js';

const dirs: string[] = [];
const sleepers: number[] = [];

afterAll(async () => {
  for (const pid of sleepers) process.kill(pid, 'SIGKILL');
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

const stateOf = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0], started: fields[19] };
};

describe('the worker state directory lock', () => {
  it('is taken over from a holder killed -9 and not yet reaped (a zombie, as a detached runtime stays)', async () => {
    // `sleep 30` is the child of a process that never reaps it (the shell exec'd `sleep 60`).
    const parent = spawn('sh', ['-c', 'sleep 30 & exec sleep 60'], { stdio: 'ignore' });
    sleepers.push(parent.pid!);
    let holder = 0;
    for (const deadline = Date.now() + 5000; holder === 0 && Date.now() < deadline; await new Promise((r) => setTimeout(r, 20))) {
      holder = Number(readFileSync(`/proc/${parent.pid}/task/${parent.pid}/children`, 'utf8').trim().split(' ')[0] || 0);
    }
    const started = stateOf(holder).started;
    process.kill(holder, 'SIGKILL');
    for (const deadline = Date.now() + 5000; stateOf(holder).state !== 'Z' && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 20));
    expect(stateOf(holder).state).toBe('Z');

    const stateDir = await mkdtemp(join(tmpdir(), 'cairn-worker-state-'));
    dirs.push(stateDir);
    await writeFile(join(stateDir, 'worker-id'), 'w-zombie-test\n');
    await writeFile(join(stateDir, 'runtime.lock'), JSON.stringify({ pid: holder, started, worker_id: 'w-zombie-test' }), { mode: 0o600 });
    const identity = await claimWorkerIdentity({ stateDir, configuredId: undefined, hostname: 'host' });
    try {
      expect(identity.workerId).toBe('w-zombie-test');
      expect(JSON.parse(readFileSync(join(stateDir, 'runtime.lock'), 'utf8'))).toMatchObject({ pid: process.pid, worker_id: 'w-zombie-test' });
    } finally {
      identity.release();
    }
  });

  it('is refused (E_CONFLICT) while its holder lives', async () => {
    const live = spawn('sleep', ['60'], { stdio: 'ignore' });
    sleepers.push(live.pid!);
    const stateDir = await mkdtemp(join(tmpdir(), 'cairn-worker-state-'));
    dirs.push(stateDir);
    await writeFile(join(stateDir, 'runtime.lock'), JSON.stringify({ pid: live.pid, started: stateOf(live.pid!).started }), { mode: 0o600 });
    await expect(claimWorkerIdentity({ stateDir, configuredId: undefined, hostname: 'host' })).rejects.toMatchObject({ code: 'E_CONFLICT' });
  });
});
