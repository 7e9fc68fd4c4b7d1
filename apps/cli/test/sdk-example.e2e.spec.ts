import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';

/*
 * The runnable example of libs/sdk/README.md, run as its reader would (plain Node, `@cairn/sdk` from
 * the workspace) against an isolated stack: it must keep working as the SDK changes.
 */

const EXAMPLE = fileURLToPath(new URL('../../../examples/sdk-outputs.mjs', import.meta.url));
let stack: TestStack;

beforeAll(async () => {
  stack = await TestStack.create('sdk-example');
  await stack.up();
}, 180_000);

afterAll(async () => {
  await stack?.dispose();
}, 120_000);

it('submits, waits, reads the outputs, uses a sandbox and verifies the chain', async () => {
  const child = spawn(process.execPath, [EXAMPLE], { env: { PATH: process.env.PATH ?? '', CAIRN_URL: stack.url, CAIRN_API_KEY: stack.apiKey }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  expect(stderr).toBe('');
  expect(code).toBe(0);
  expect(stdout).toMatch(/^run_\S+: SEALED$/m);
  expect(stdout).toContain('step 0 stdout: hello from a step | stderr: a warning');
  expect(stdout).toMatch(/\/out\/result\.txt \(5 bytes, sha256 [0-9a-f]{12}…\): done/);
  expect(stdout).toMatch(/sbx_\S+: wc says 11 \/work\/in\.txt/);
  expect(stdout).toMatch(/chain OK: \d+ receipts, head [0-9a-f]{64}/);
}, 180_000);
