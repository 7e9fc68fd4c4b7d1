import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { sealReceipt } from '@cairn/evidence';

/** The built CLI, as a user runs it (`npx --no-install cairn` starts this same file). */
export const CAIRN_BIN = fileURLToPath(new URL('../bin/cairn.js', import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs the built CLI on this Node (Node 24), with only the variables given plus PATH. */
export function runCairn(args: readonly string[], env: Record<string, string> = {}, cwd?: string): Promise<CliRun> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CAIRN_BIN, ...args], {
      cwd,
      env: { PATH: process.env.PATH ?? '', NO_COLOR: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), ms: performance.now() - started });
    });
  });
}

/** A loopback port nothing listens on (bound, then released). */
export async function closedLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** A valid chain of `length` receipts, sealed from genesis, for offline tests. */
export function sampleChain(chainId: string, length: number): Record<string, unknown>[] {
  const receipts: Record<string, unknown>[] = [];
  let prev = '0'.repeat(64);
  for (let seq = 1; seq <= length; seq += 1) {
    const body = {
      v: 1,
      seq,
      run_id: chainId,
      tenant: 'default',
      type: seq === 1 ? 'run.submitted' : 'step.completed',
      actor: seq === 1 ? 'intake' : 'runtime',
      ts: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString(),
      causation: seq === 1 ? null : `${chainId}:${seq - 1}`,
      ...(seq === 1 ? {} : { stage: 'test', argv: ['pytest', '-q'], exit_code: 0, stdout_sha256: 'a'.repeat(64), stderr_sha256: 'b'.repeat(64) }),
    };
    const receipt = sealReceipt(prev, body);
    receipts.push(receipt);
    prev = receipt.hash;
  }
  return receipts;
}

export function toJsonLines(receipts: readonly unknown[]): string {
  return receipts.map((receipt) => `${JSON.stringify(receipt)}\n`).join('');
}
