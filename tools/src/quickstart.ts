import { spawn } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jsonLine, splitLines } from '@cairn/evidence';

/*
 * The quick start (`npm run quickstart`, after tools/ensure-services.sh and the build): starts
 * the stack with `cairn up`, runs examples/quickstart.yaml to its seal with `cairn run --wait`,
 * verifies the run's proof bundle with `cairn verify <run id>`, and shows an edited copy of the
 * chain failing verification. Everything goes through the CLI, as a user would type it.
 */

const CLI = fileURLToPath(new URL('../../apps/cli/bin/cairn.js', import.meta.url));
const SPEC = fileURLToPath(new URL('../../examples/quickstart.yaml', import.meta.url));

interface CliResult {
  code: number | null;
  stdout: string;
}

class QuickstartError extends Error {}

/** Runs the CLI as `npx --no-install cairn …` would; its progress goes straight to our stderr. */
function cairn(args: readonly string[]): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'inherit'], env: process.env });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout }));
  });
}

function json<T>(what: string, result: CliResult): T {
  try {
    return JSON.parse(result.stdout) as T;
  } catch {
    throw new QuickstartError(`${what} exited ${String(result.code)} without a result`);
  }
}

function log(message: string): void {
  process.stderr.write(`\n[quickstart] ${message}\n`);
}

/** A copy of the chain file with one recorded exit code changed: what an editor of evidence would do. */
export function tamper(chainFile: string): { text: string; seq: number; field: string } {
  const lines = splitLines(chainFile).filter((line) => line.trim() !== '');
  const index = lines.findIndex((line) => (JSON.parse(line) as { type?: unknown }).type === 'step.completed');
  if (index === -1) throw new QuickstartError('the chain has no step.completed receipt to edit');
  const receipt = JSON.parse(lines[index]!) as { seq: number; exit_code: number };
  const changed = receipt.exit_code === 0 ? 1 : 0;
  lines[index] = jsonLine({ ...receipt, exit_code: changed }).trimEnd();
  return { text: `${lines.join('\n')}\n`, seq: receipt.seq, field: `exit_code ${receipt.exit_code} → ${changed}` };
}

async function main(): Promise<number> {
  const shown = (path: string) => relative(process.cwd(), path) || path;

  log('starting the stack: cairn up');
  const up = json<{ ok: boolean; url: string; keyFile: string; outcome: string; error?: { message: string } }>('cairn up', await cairn(['up', '--json']));
  if (!up.ok) throw new QuickstartError(`cairn up: ${up.error?.message ?? 'failed'}`);

  log(`running ${shown(SPEC)}: cairn run ${shown(SPEC)} --wait`);
  const outcome = json<{ runId?: string; state: string; verdict: string | null; score: number | null; maxScore: number | null; errorCode: string | null; error?: { message: string } }>(
    'cairn run',
    await cairn(['run', SPEC, '--wait', '--json']),
  );
  if (outcome.runId === undefined) throw new QuickstartError(`cairn run: ${outcome.error?.message ?? 'failed'}`);
  const { runId } = outcome;

  const dir = join(process.cwd(), '.cairn', 'quickstart');
  await mkdir(dir, { recursive: true });
  const bundlePath = join(dir, `${runId}.bundle.json`);
  const chainPath = join(dir, `${runId}.jsonl`);
  const tamperedPath = join(dir, `${runId}.tampered.jsonl`);

  log(`verifying it: cairn verify ${runId}`);
  const verified = await cairn(['verify', runId, '-o', bundlePath]);
  if (verified.code !== 0) throw new QuickstartError(`cairn verify ${runId} exited ${String(verified.code)}`);

  const exported = await cairn(['export', runId, '-o', chainPath]);
  if (exported.code !== 0) throw new QuickstartError(`cairn export ${runId} exited ${String(exported.code)}`);
  const tampered = tamper(await readFile(chainPath, 'utf8'));
  await writeFile(tamperedPath, tampered.text);
  log('verifying an edited copy of the chain (this one must fail)');
  const refused = json<{ error?: { code?: string; details?: { firstBadSeq?: number; reason?: string } } }>('cairn verify', await cairn(['verify', tamperedPath, '--json']));
  if (refused.error?.code !== 'E_CHAIN_BROKEN' || refused.error.details?.firstBadSeq !== tampered.seq) {
    throw new QuickstartError('the edited chain was not refused at the edited receipt');
  }

  const grade = outcome.score === null || outcome.maxScore === null ? '-' : `${outcome.score}/${outcome.maxScore}`;
  const [chainLine, claimsLine] = verified.stdout.trim().split('\n');
  process.stdout.write(
    [
      '',
      'Cairn quick start',
      '',
      `  stack      ${up.url}  (${up.outcome === 'started' ? 'started' : 'already running'}; admin API key in ${up.keyFile})`,
      `  run        ${runId}  ${shown(SPEC)}`,
      `  state      ${outcome.state}${outcome.errorCode === null ? '' : `  ${outcome.errorCode}`}`,
      `  verdict    ${outcome.verdict ?? '-'}`,
      `  grade      ${grade}`,
      `  verified   ${chainLine ?? ''}`,
      `             ${claimsLine ?? ''}`,
      `  bundle     ${shown(bundlePath)}`,
      `  tampered   ${shown(tamperedPath)}  (step.completed at seq ${tampered.seq}: ${tampered.field})`,
      `             → E_CHAIN_BROKEN at seq ${tampered.seq} (${refused.error.details.reason ?? '?'}), exit 1`,
      '',
      'Check it yourself — offline, no server needed:',
      `  npx --no-install cairn verify ${shown(bundlePath)}`,
      `  npx --no-install cairn verify ${shown(tamperedPath)}   # fails: E_CHAIN_BROKEN, exit 1`,
      'More:',
      `  npx --no-install cairn status                 # recent runs`,
      `  npx --no-install cairn events ${runId}`,
      `  npx --no-install cairn run ${shown(SPEC)} --wait`,
      '  npx --no-install cairn down                   # stop the stack',
      '',
    ].join('\n'),
  );
  return outcome.state === 'SEALED' ? 0 : 1;
}

try {
  process.exitCode = await main();
} catch (error) {
  process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
