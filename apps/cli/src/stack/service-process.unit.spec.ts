import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { isServiceAlive, serviceMain, stopProcesses } from './service-process.js';

const SCRIPT = 'process.on("SIGTERM", () => { if (process.argv[1] === "stubborn") return; process.exit(0); }); setInterval(() => {}, 1000);';

async function child(kind: 'polite' | 'stubborn') {
  const proc = spawn(process.execPath, ['-e', SCRIPT, kind], { detached: true, stdio: 'ignore' });
  await once(proc, 'spawn');
  // Give node a moment to install its SIGTERM handler.
  await new Promise((resolve) => setTimeout(resolve, 300));
  return { proc, record: { pid: proc.pid!, main: '-e', log: '/dev/null', startedAt: '' } };
}

describe('service processes', () => {
  it('names each service’s built main.js', () => {
    expect(serviceMain('gateway', '/repo')).toBe('/repo/apps/gateway/dist/main.js');
  });

  it('knows a live process, and that a pid running another program is not the service', () => {
    expect(isServiceAlive(process.pid)).toBe(true);
    expect(isServiceAlive(process.pid, '/nowhere/apps/x/dist/main.js')).toBe(false);
    expect(isServiceAlive(2 ** 22 + 17)).toBe(false);
  });

  it('stops with SIGTERM, and with SIGKILL what ignores it', async () => {
    const polite = await child('polite');
    const stubborn = await child('stubborn');
    const signalOf = (proc: ChildProcess) => new Promise<NodeJS.Signals | null>((resolve) => proc.once('exit', (_code, sig) => resolve(sig)));
    const exited = Promise.all([signalOf(polite.proc), signalOf(stubborn.proc)]);
    const result = await stopProcesses([polite.record, stubborn.record], 700);
    expect(result).toEqual({ terminated: [polite.record.pid], killed: [stubborn.record.pid] });
    const [politeSignal, stubbornSignal] = await exited;
    expect(politeSignal).toBeNull();
    expect(stubbornSignal).toBe('SIGKILL');
    expect(isServiceAlive(polite.record.pid)).toBe(false);
  });
});
