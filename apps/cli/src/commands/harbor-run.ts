import { randomUUID } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { CairnError, isCairnError } from '@cairn/contracts';
import type { Cairn } from '@cairn/sdk';
import type { CommandContext } from '../command-context.js';
import { EXIT_FAILED, usageError } from '../exit-codes.js';
import { harborImageAdditions, harborRunSpec } from '@cairn/harbor';
import { isHarborTaskDir, readHarborTaskDir } from '@cairn/harbor-dir';
import type { AgentStep } from '@cairn/harbor';
import type { Output } from '../output.js';
import { isUnsuccessful, outcomeOf } from '../run-report.js';
import type { RunOutcome } from '../run-report.js';
import { resolveTarget } from '../stack/stack-target.js';
import { followRun } from './follow-run.js';

export interface HarborOptions {
  oracle?: boolean;
  agent?: string;
  timeout: number | null;
}

/** One task's result: a graded run, or why it did not run. */
export interface TaskResult {
  task: string;
  dir: string;
  runId: string | null;
  state: string | null;
  /** The reward earned (score / maxScore), null when ungraded. */
  reward: number | null;
  passed: boolean;
  errorCode: string | null;
  message: string | null;
}

/** `--agent '["python3", "/work/agent.py"]'`: an argv (I-3), never a shell string. */
export function parseAgentOption(options: Pick<HarborOptions, 'oracle' | 'agent'>): AgentStep {
  if (options.oracle === true && options.agent !== undefined) throw usageError('--oracle and --agent are alternatives: give one');
  if (options.oracle === true) return { kind: 'oracle' };
  if (options.agent === undefined) throw usageError('a Harbor task needs --oracle (run solution/solve.sh as the agent) or --agent \'["program", "arg", …]\'');
  let argv: unknown;
  try {
    argv = JSON.parse(options.agent);
  } catch {
    throw usageError('--agent takes a JSON array of strings (an argv, I-3), e.g. \'["python3", "/work/agent.py"]\'');
  }
  if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === 'string') || argv[0] === '') {
    throw usageError('--agent takes a non-empty JSON array of strings (an argv, I-3)');
  }
  return { kind: 'agent', argv };
}

/** The task directories a path names: itself when it is a task, else its subdirectories that are. */
export async function harborTaskDirs(path: string): Promise<{ job: boolean; dirs: string[] } | null> {
  if (await isHarborTaskDir(path)) return { job: false, dirs: [path] };
  const entries = await readdir(path, { withFileTypes: true }).catch(() => null);
  if (entries === null) return null;
  const dirs: string[] = [];
  for (const entry of entries.filter((e) => e.isDirectory()).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    if (await isHarborTaskDir(join(path, entry.name))) dirs.push(join(path, entry.name));
  }
  return dirs.length === 0 ? null : { job: true, dirs };
}

async function runTask(client: Cairn, dir: string, agent: AgentStep, output: Output, timeoutMs: number | null): Promise<TaskResult> {
  const { task } = await readHarborTaskDir(dir);
  const { buildDockerfileImage } = await import('@cairn/sandbox-docker');
  const additions = harborImageAdditions(task);
  output.note(`${task.name}: building its environment (environment/Dockerfile)…`);
  const progress = output.progress();
  const built = await buildDockerfileImage({
    dockerfile: additions.dockerfile,
    contextDir: join(dir, 'environment'),
    extraFiles: additions.files,
    onProgress: (line) => progress.update(line.slice(0, 120)),
  });
  progress.done();
  output.note(`  image       ${built.tag} ${built.id}${built.cached ? ' (cached)' : ''}`);
  const spec = {
    ...harborRunSpec(task, { image: `${built.tag}@${built.id}`, layout: 'built' }, agent),
    imageBuild: { digest: built.digest, dockerfileSha256: built.dockerfileSha256, bases: built.bases, imageId: built.id, cached: built.cached },
  };
  const submitted = await client.runs.submit(spec, { idempotencyKey: randomUUID() });
  output.note(`  run         ${submitted.runId}`);
  const followed = await followRun(client, submitted.runId, output, timeoutMs);
  const outcome: RunOutcome = outcomeOf(followed.view);
  const reward = outcome.score !== null && outcome.maxScore !== null && outcome.maxScore > 0 ? outcome.score / outcome.maxScore : null;
  return {
    task: task.name,
    dir,
    runId: outcome.runId,
    state: outcome.state,
    reward,
    passed: !isUnsuccessful(outcome.state) && reward === 1,
    errorCode: outcome.errorCode,
    message: null,
  };
}

function formatReward(result: TaskResult): string {
  if (result.errorCode !== null && result.runId === null) return `error ${result.errorCode}: ${result.message ?? ''}`;
  const reward = result.reward === null ? 'ungraded' : `reward ${result.reward}`;
  return `${result.passed ? 'pass' : 'fail'}  ${reward}  ${result.runId ?? ''}  ${result.state ?? ''}${result.errorCode === null ? '' : ` ${result.errorCode}`}`;
}

/**
 * `cairn run <task-dir>` and `cairn run <dir of task dirs>`: each task's environment is built
 * (once per digest), its RunSpec submitted and followed to its seal; a job prints a summary.
 */
export async function runHarbor(context: CommandContext, output: Output, path: string, found: { job: boolean; dirs: string[] }, options: HarborOptions): Promise<void> {
  const agent = parseAgentOption(options);
  const { client } = await resolveTarget(context.env);
  const results: TaskResult[] = [];
  for (const dir of found.dirs) {
    try {
      results.push(await runTask(client, dir, agent, output, options.timeout));
    } catch (error) {
      // One task's failure is that task's line in a job; a lone task's is the command's error.
      if (!found.job || !isCairnError(error)) throw error;
      output.note(`${dir}: ${error.code}: ${error.message}`);
      results.push({ task: dir.split('/').at(-1) ?? dir, dir, runId: null, state: null, reward: null, passed: false, errorCode: error.code, message: error.message });
    }
  }
  const ran = results.filter((r) => r.runId !== null);
  const passed = results.filter((r) => r.passed).length;
  const summary = {
    ok: true,
    tasks: results.length,
    ran: ran.length,
    passed,
    passRate: results.length === 0 ? 0 : passed / results.length,
    meanReward: ran.length === 0 ? null : ran.reduce((sum, r) => sum + (r.reward ?? 0), 0) / ran.length,
    results,
  };
  if (!found.job) {
    const only = results[0];
    if (only === undefined) throw new CairnError('E_INTERNAL', `no task ran from ${path}`);
    output.result(`${only.task}  ${formatReward(only)}`, { ...summary });
    if (only.state !== null && isUnsuccessful(only.state)) context.exitCode = EXIT_FAILED;
    return;
  }
  const width = Math.max(...results.map((r) => r.task.length));
  const lines = results.map((r) => `${r.task.padEnd(width)}  ${formatReward(r)}`);
  lines.push(`${passed}/${results.length} passed (pass rate ${(summary.passRate * 100).toFixed(0)}%)${summary.meanReward === null ? '' : `, mean reward ${summary.meanReward.toFixed(3)}`}`);
  output.result(lines.join('\n'), summary);
  const notRun = results.filter((r) => r.runId === null);
  if (notRun.length > 0 || results.some((r) => r.state !== null && isUnsuccessful(r.state))) context.exitCode = EXIT_FAILED;
}
