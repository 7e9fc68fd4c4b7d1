import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';

/** A service's real process (its built `dist/main.js`), started by a test. */
export interface ServiceProcess {
  readonly child: ChildProcess;
  /** Everything it has written to stdout and stderr so far. */
  output(): string;
  /** How it ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Processes a test file started, so its `afterAll` can kill what is left: `start` runs `main` with
 * Node and only `PATH` plus `env` in its environment (nothing of the test's own leaks in).
 */
export class ServiceProcesses {
  private readonly started: ChildProcess[] = [];

  start(main: string, env: Record<string, string>): ServiceProcess {
    const child = spawn(process.execPath, [main], { env: { PATH: process.env.PATH ?? '', ...compileCache(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.started.push(child);
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    return { child, output: () => output, exited };
  }

  /** SIGKILLs every one still running (SIGCONT first: a stopped one must be able to die). */
  killAll(): void {
    for (const child of this.started) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  }
}

/** Polls `check` every 100 ms until it holds; throws naming `what` after `ms`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Node's compile cache of the test run (vitest.config.ts, ADR 0039), for a process a test starts with an environment of its own. */
export function compileCache(): { NODE_COMPILE_CACHE?: string } {
  const dir = process.env.NODE_COMPILE_CACHE;
  return dir === undefined ? {} : { NODE_COMPILE_CACHE: dir };
}
