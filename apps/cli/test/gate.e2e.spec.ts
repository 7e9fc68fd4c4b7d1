import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import type { CliRun } from './cli.harness.js';
import { TestStack } from './stack.harness.js';
import type { RunOutcome } from './stack.harness.js';

/*
 * The regression gate end to end (docs/adr/0004), through the CLI and REST on the real Docker
 * engine, NATS and PostgreSQL: examples/patch-gate.yaml as shipped (its patch keeps the tests
 * green: SEALED), the same spec with a patch that breaks them (ROLLBACK E_GATE_FAIL, the patch
 * rejected by its hash on the chain), and a gate that cannot be judged (E_INPUT, nothing created).
 */

const EXAMPLE = fileURLToPath(new URL('../../../examples/patch-gate.yaml', import.meta.url));

/** The example's patch, turned into one that changes what calc.sh prints. */
const BAD_DIFF = [
  '--- a/src/calc.sh',
  '+++ b/src/calc.sh',
  '@@ -1,3 +1,3 @@',
  ' #!/bin/sh',
  ' # add A B',
  '-echo $(($1 + $2))',
  '+echo $(($1 + $2 + 1))',
  '',
].join('\n');

interface SpecFile {
  path: string;
  content: string;
}
interface Receipt {
  seq: number;
  type: string;
  [field: string]: unknown;
}

let stack: TestStack;
let example: { name: string; files: SpecFile[]; [field: string]: unknown };
const runs: Record<string, Promise<{ cli: CliRun; outcome: RunOutcome }>> = {};

async function runAndWait(specPath: string): Promise<{ cli: CliRun; outcome: RunOutcome }> {
  const cli = await stack.cairn(['run', specPath, '--wait', '--json']);
  try {
    return { cli, outcome: JSON.parse(cli.stdout) as RunOutcome };
  } catch {
    throw new Error(`cairn run printed no JSON (exit ${cli.code}):\n${cli.stdout}\n${cli.stderr}\n${await stack.logs()}`);
  }
}

async function receipts(runId: string): Promise<Receipt[]> {
  const response = await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: Receipt[] }).items;
}

function only(list: readonly Receipt[], type: string): Receipt {
  const found = list.filter((r) => r.type === type);
  expect(found, `${type} receipts`).toHaveLength(1);
  return found[0]!;
}

beforeAll(async () => {
  example = parseYaml(await readFile(EXAMPLE, 'utf8')) as typeof example;
  stack = await TestStack.create('gate-e2e', { CAIRN_GRADER_TEARDOWN_GRACE_MS: '3000' });
  expect((await stack.up()).outcome).toBe('started');
  const broken = {
    ...example,
    name: 'patch gate: a patch that breaks calc.sh',
    files: example.files.map((file) => (file.path === '/work/fix.diff' ? { ...file, content: BAD_DIFF } : file)),
  };
  runs.passing = runAndWait(EXAMPLE);
  runs.broken = stack.specFile('broken', broken).then(runAndWait);
  for (const pending of Object.values(runs)) pending.catch(() => undefined);
});

afterAll(async () => {
  await stack?.dispose();
});

describe('a regression gate, through the whole stack', () => {
  it('a patch that keeps the tests passing: the gate passes, the run is graded and SEALED (exit 0)', async () => {
    const { cli, outcome } = await runs.passing!;
    expect(cli.code, cli.stdout + cli.stderr).toBe(0);
    expect(outcome).toMatchObject({ state: 'SEALED', verdict: 'SUPPORTS', errorCode: null, score: 1, maxScore: 1 });
    const chain = await receipts(outcome.runId);
    const verification = only(chain, 'verification.completed');
    expect(verification.error_code).toBeUndefined();
    expect(verification.gate).toMatchObject({
      passed: true,
      patch_step: 1,
      patch_exit_code: 0,
      patch: { path: '/out/fix.diff', rejected: false },
      checks: [
        { id: 'tests-pass', before: 'holds', after: 'holds', result: 'held' },
        { id: 'no-failed-tests', before: 'holds', after: 'holds', result: 'held' },
      ],
    });
    expect(chain.map((r) => r.type).slice(-4)).toEqual(['kernel.facts', 'verification.completed', 'grade.recorded', 'run.sealed']);
    await stack.expectCleanAndVerifiable(outcome.runId);
  });

  it('a patch that breaks a passing test: ROLLBACK E_GATE_FAIL, the patch rejected by its hash, sealed last, the chain verifies (exit 1)', async () => {
    const { cli, outcome } = await runs.broken!;
    expect(cli.code, cli.stdout + cli.stderr).toBe(1);
    expect(outcome).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_GATE_FAIL', score: null });
    expect(cli.stderr).toContain('sealed      ROLLBACK E_GATE_FAIL');

    const chain = await receipts(outcome.runId);
    // Every step ran: the gate is judged on the record, after the run, by the verifier.
    expect(chain.filter((r) => r.type === 'step.completed').map((r) => [r.step_index, r.exit_code])).toEqual([
      [0, 0],
      [1, 0],
      [2, 1],
    ]);
    expect(chain.map((r) => r.type).slice(-3)).toEqual(['kernel.facts', 'verification.completed', 'run.sealed']);
    const diffSha = createHash('sha256').update(BAD_DIFF).digest('hex');
    const executed = only(chain, 'run.executed');
    expect((executed.artifact_hashes as Record<string, string>)['/out/fix.diff']).toBe(diffSha);
    const verification = only(chain, 'verification.completed');
    expect(verification.error_code).toBe('E_GATE_FAIL');
    expect(verification.gate).toMatchObject({
      passed: false,
      patch_step: 1,
      patch_exit_code: 0,
      patch: { path: '/out/fix.diff', sha256: diffSha, rejected: true },
      checks: [
        { id: 'tests-pass', before: 'holds', after: 'contradicted', result: 'regressed' },
        { id: 'no-failed-tests', before: 'holds', after: 'contradicted', result: 'regressed' },
      ],
    });
    expect(only(chain, 'run.sealed')).toMatchObject({ final_state: 'ROLLBACK', error_code: 'E_GATE_FAIL', evidence_digest: verification.hash });
    expect(chain.some((r) => r.type === 'grade.recorded')).toBe(false);

    // The projection agrees with the chain.
    expect(await stack.waitForRun(outcome.runId, (run) => run.sealed)).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_GATE_FAIL', sealed: true });
    await stack.expectCleanAndVerifiable(outcome.runId);
  });

  it('a gate that names an after-step before its patch step: E_INPUT naming the field, exit 2, no run created', async () => {
    const gate = example.gate as { checks: Record<string, unknown>[] };
    const bad = { ...example, name: 'a gate that cannot be judged', gate: { ...gate, checks: [{ ...gate.checks[0], after: 'steps[0].exit_code' }] } };
    const cli = await stack.cairn(['run', await stack.specFile('bad-gate', bad), '--json']);
    expect(cli.code, cli.stdout + cli.stderr).toBe(2);
    const error = (JSON.parse(cli.stdout) as { ok: false; error: { code: string; message: string } }).error;
    expect(error.code).toBe('E_INPUT');
    expect(error.message).toContain('gate.checks[0].after: steps[0].exit_code must name a step after the patch step (step 1)');
    // REST refuses it the same way, and nothing was created.
    const response = await stack.api('/v1/runs', { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'bad-gate-1' }, body: JSON.stringify(bad) });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { code: string }).code).toBe('E_INPUT');
    const listed = await stack.cairn(['status', '--json', '--limit', '200']);
    expect(listed.code).toBe(0);
    const names = (JSON.parse(listed.stdout) as { items: { name: string | null }[] }).items.map((r) => r.name);
    expect(names).not.toContain('a gate that cannot be judged');
  });
});
