import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isEntryModule, startBenchStack } from './bench/bench-stack.js';

/*
 * `npm run test:python`: the Python SDK's pytest suite (sdk/python/tests) against a real, isolated
 * Cairn stack — `cairn up` with its own home, stack id, streams, buckets and database, as the
 * end-to-end tests start theirs — then `cairn down` and everything it made removed. pytest finds
 * the stack through CAIRN_URL / CAIRN_API_KEY and, for the CLI it calls (`cairn export`,
 * `cairn verify`), the stack's own CAIRN_* variables. Its exit code is this script's.
 */

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const PYTHON = `${REPO}.venv/bin/python`;

async function main(): Promise<number> {
  if (!existsSync(PYTHON)) {
    process.stderr.write('[python] no .venv: run `bash tools/ensure-python.sh` first (npm run test:python does)\n');
    return 1;
  }
  const started = performance.now();
  // Room for the Inspect checks' sandboxes (one per check) beside the SDK tests' own.
  const stack = await startBenchStack('pysdk', { CAIRN_WORKER_SLOTS: '6' });
  process.stderr.write(`[python] stack ${stack.stackId} at ${stack.url} (up in ${Math.round(performance.now() - started)} ms)\n`);
  try {
    return await new Promise<number>((resolve, reject) => {
      const args = process.argv.slice(2);
      const child = spawn(PYTHON, ['-m', 'pytest', ...(args.some((arg) => !arg.startsWith('-')) ? args : ['sdk/python/tests', ...args])], {
        cwd: REPO,
        stdio: 'inherit',
        env: { ...process.env, ...stack.env, CAIRN_URL: stack.url, CAIRN_API_KEY: stack.apiKey, NO_COLOR: '1' },
      });
      child.once('error', reject);
      child.once('close', (code) => resolve(code ?? 1));
    });
  } finally {
    await stack.close();
    process.stderr.write(`[python] done in ${Math.round((performance.now() - started) / 1000)} s\n`);
  }
}

if (isEntryModule(import.meta.url)) {
  main().then(
    (code) => (process.exitCode = code),
    (error: unknown) => {
      process.stderr.write(`[python] ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
