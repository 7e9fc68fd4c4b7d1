import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EvidenceLogConfigSchema, loadConfig } from '@cairn/config';
import { CairnError, isCairnError, parseEvidenceReceipt, parseRunSpec } from '@cairn/contracts';
import type { ReceiptEnvelope, RunSpec } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import { EvidenceLog, evidenceLogOptionsFromConfig } from '@cairn/evidence-log';

/*
 * The quick start: until the run pipeline (intake → … → grader) lands, it appends a realistic
 * sample run to the evidence log — the receipts the services will write, validated against the
 * contracts — then exports it with the CLI, verifies it offline, and shows a tampered copy fail.
 */

const CLI = fileURLToPath(new URL('../../apps/cli/bin/cairn.js', import.meta.url));
const TENANT = 'default';
const IMAGE = 'cairn/sandbox:1';
const WORKER = 'worker-local-1';

interface SampleStep {
  argv: string[];
  stdout: string;
  stderr: string;
  exitCode: number;
  durationMs: number;
  artifacts: Record<string, string>;
}

const SPEC: RunSpec = parseRunSpec({
  name: 'quickstart: greet and count words',
  image: IMAGE,
  steps: [
    { name: 'greet', argv: ['python3', '-c', 'print("hello from the sandbox")'] },
    { name: 'count', argv: ['wc', '-w', '/work/poem.txt'] },
    { name: 'report', argv: ['python3', '/work/report.py', '/out/report.json'] },
  ],
  files: [
    { path: '/work/poem.txt', content: 'stones stacked by strangers mark the way\n' },
    { path: '/work/report.py', content: 'import json, sys\njson.dump({"words": 7}, open(sys.argv[1], "w"))\n' },
  ],
  outputs: ['/out'],
  caps: { wallSeconds: 60, memoryMiB: 256, pids: 64, diskMiB: 64, cpus: 1 },
  network: 'none',
  checks: [
    { id: 'greets', source: 'steps[0].stdout', op: 'contains', value: 'hello', weight: 1 },
    { id: 'counts-words', source: 'steps[1].exit_code', op: 'eq', value: 0, weight: 1 },
    { id: 'report-written', source: 'artifacts["/out/report.json"]', op: 'exists', weight: 2 },
  ],
  claim: {
    statement: 'every step exits 0 and the report is written',
    checks: [
      { id: 'all-exit-zero', source: 'facts.exit_codes.all_zero', op: 'eq', value: true },
      { id: 'report-exists', source: 'artifacts["/out/report.json"]', op: 'exists' },
    ],
  },
});

const REPORT = '{"words": 7}';
const STEPS: SampleStep[] = [
  { argv: SPEC.steps[0]!.argv, stdout: 'hello from the sandbox\n', stderr: '', exitCode: 0, durationMs: 41, artifacts: {} },
  { argv: SPEC.steps[1]!.argv, stdout: '7 /work/poem.txt\n', stderr: '', exitCode: 0, durationMs: 12, artifacts: {} },
  { argv: SPEC.steps[2]!.argv, stdout: '', stderr: '', exitCode: 0, durationMs: 38, artifacts: { '/out/report.json': sha256Hex(REPORT) } },
];
const CAPS = { wall_seconds: 60, memory_mib: 256, pids: 64, disk_mib: 64, cpus: 1 };

function toolOf(argv: readonly string[]): string {
  return (argv[0] ?? '').split('/').pop() ?? '';
}

function log(message: string): void {
  process.stderr.write(`[quickstart] ${message}\n`);
}

/** Appends the sample run, one receipt after another, each caused by the one before. */
async function appendSampleRun(evidence: EvidenceLog, runId: string): Promise<ReceiptEnvelope[]> {
  const receipts: ReceiptEnvelope[] = [];
  const append = async (type: string, actor: string, fields: Record<string, unknown>, key?: string): Promise<ReceiptEnvelope> => {
    const previous = receipts.at(-1);
    const causation = previous === undefined ? null : `${runId}:${previous.seq}`;
    const input = { type, actor, tenant: TENANT, causation, fields, ...(key === undefined ? {} : { key }) };
    const { receipt } = await evidence.append(runId, input);
    // The sample must stay what the services will write: every receipt matches its contract.
    const parsed = parseEvidenceReceipt(receipt);
    if (!parsed.ok) throw new CairnError('E_INTERNAL', `the quick start's ${type} receipt does not match the contracts: ${parsed.message}`);
    receipts.push(receipt);
    return receipt;
  };
  const head = () => receipts.at(-1)!.hash;
  const now = Date.now();

  await append('run.submitted', 'intake', {
    spec: SPEC,
    spec_sha256: sha256Hex(canonicalJson(SPEC)),
    submitted_by: 'key:quickstart',
    idempotency_key_sha256: sha256Hex(`quickstart:${runId}`),
  });
  await append('policy.decided', 'policy', {
    decision: 'allow',
    policy_version: sha256Hex(canonicalJson({ policy: 'default', images: [IMAGE], egress: 'deny-all' })),
    reasons: ['caps within the frozen maxima', `image ${IMAGE} is allowed`, 'network none: no egress requested'],
    caps: CAPS,
    image: IMAGE,
  });
  await append('run.scheduled', 'scheduler', {
    worker_id: WORKER,
    lease_id: `lease-${randomBytes(6).toString('hex')}`,
    lease_expires_at: new Date(now + 90_000).toISOString(),
    attempt: 1,
  });
  const containerName = `cairn-${runId}`;
  await append('sandbox.created', 'runtime', {
    container_name: containerName,
    worker_id: WORKER,
    driver: 'docker',
    image: IMAGE,
    image_digest: null,
    caps: CAPS,
    network: 'none',
  });
  for (const [index, step] of STEPS.entries()) {
    const stepFields = { step_index: index, stage: 'step', tool: toolOf(step.argv), argv: step.argv };
    await append('step.started', 'runtime', { ...stepFields, workdir: '/work', env_names: [] }, `step-${index}`);
    await append(
      'step.completed',
      'runtime',
      {
        ...stepFields,
        exit_code: step.exitCode,
        signal: null,
        stdout_sha256: sha256Hex(step.stdout),
        stderr_sha256: sha256Hex(step.stderr),
        stdout_bytes: Buffer.byteLength(step.stdout),
        stderr_bytes: Buffer.byteLength(step.stderr),
        output_truncated: false,
        duration_ms: step.durationMs,
        limits_hit: [],
        redactions: [],
        artifact_hashes: step.artifacts,
      },
      `step-${index}`,
    );
  }
  const artifacts = Object.assign({}, ...STEPS.map((s) => s.artifacts)) as Record<string, string>;
  const stepsMs = STEPS.reduce((sum, s) => sum + s.durationMs, 0);
  await append('sandbox.destroyed', 'runtime', { container_name: containerName, verified_gone: true, reason: 'completed', duration_ms: stepsMs + 230 });
  await append('run.executed', 'runtime', {
    steps_completed: STEPS.length,
    exit_codes: STEPS.map((s) => s.exitCode),
    artifact_hashes: artifacts,
    duration_ms: stepsMs + 230,
  });
  await append('kernel.facts', 'kernel', {
    facts: { exit_codes: { codes: STEPS.map((s) => s.exitCode), all_zero: true }, word_count: { '/work/poem.txt': 7 } },
    operations: ['exit_codes', 'text_contains', 'file_sha256'],
  });
  await append('verification.completed', 'verifier', {
    verdict: 'SUPPORTS',
    chain_ok: true,
    head_hash: head(),
    receipts_checked: receipts.length,
    invariants: [
      { id: 'chain', ok: true },
      { id: 'every_step_has_receipt', ok: true },
      { id: 'caps_honoured', ok: true },
      { id: 'teardown', ok: true },
      { id: 'no_secret_leaked', ok: true },
    ],
    checks: [
      { id: 'all-exit-zero', outcome: 'holds' },
      { id: 'report-exists', outcome: 'holds' },
    ],
  });
  await append('grade.recorded', 'grader', {
    score: 4,
    max_score: 4,
    upper_bound: 4,
    criteria: [
      { id: 'greets', kind: 'check', weight: 1, earned: 1, scored: true },
      { id: 'counts-words', kind: 'check', weight: 1, earned: 1, scored: true },
      { id: 'report-written', kind: 'check', weight: 2, earned: 2, scored: true },
    ],
  });
  await append('run.sealed', 'grader', { final_state: 'SEALED', evidence_digest: head() });
  return receipts;
}

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI exactly as a user would (`npx --no-install cairn …` starts the same file). */
function cairn(args: readonly string[]): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function cliFailure(what: string, result: CliResult): CairnError {
  return new CairnError('E_INTERNAL', `${what} exited ${String(result.code)}: ${(result.stderr || result.stdout).trim()}`);
}

/** A copy of the chain file with one recorded exit code changed: exactly what an editor of evidence would do. */
function tamper(chainFile: string): { text: string; seq: number; field: string } {
  const lines = chainFile.trimEnd().split('\n');
  const index = lines.findIndex((line) => (JSON.parse(line) as { type?: unknown }).type === 'step.completed');
  const receipt = JSON.parse(lines[index]!) as { seq: number; exit_code: number };
  lines[index] = JSON.stringify({ ...receipt, exit_code: receipt.exit_code === 0 ? 1 : 0 });
  return { text: `${lines.join('\n')}\n`, seq: receipt.seq, field: `exit_code ${receipt.exit_code} → ${receipt.exit_code === 0 ? 1 : 0}` };
}

async function main(): Promise<void> {
  const config = loadConfig(EvidenceLogConfigSchema);
  const runId = `run_quickstart_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;

  log(`connecting to NATS at ${config.CAIRN_NATS_URL} (stream ${config.CAIRN_EVIDENCE_STREAM})`);
  let evidence: EvidenceLog;
  try {
    evidence = await EvidenceLog.connect(evidenceLogOptionsFromConfig(config, { name: 'cairn-quickstart' }));
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new CairnError('E_UNAVAILABLE', `${why}; start NATS with \`bash tools/ensure-services.sh\` or set CAIRN_NATS_URL`);
  }
  let receipts: ReceiptEnvelope[];
  try {
    log(`appending a sample run ${runId}`);
    receipts = await appendSampleRun(evidence, runId);
  } finally {
    await evidence.close();
  }
  const head = receipts.at(-1)!;

  const dir = join(process.cwd(), '.cairn', 'quickstart');
  await mkdir(dir, { recursive: true });
  const chainPath = join(dir, `${runId}.jsonl`);
  const tamperedPath = join(dir, `${runId}.tampered.jsonl`);
  const shown = (path: string) => relative(process.cwd(), path);

  log('exporting the chain with `cairn export`');
  const exported = await cairn(['export', runId, '-o', chainPath]);
  if (exported.code !== 0) throw cliFailure('cairn export', exported);

  log('verifying it offline with `cairn verify`');
  const verified = await cairn(['verify', chainPath]);
  if (verified.code !== 0) throw cliFailure('cairn verify', verified);
  if (!verified.stdout.includes(head.hash)) throw new CairnError('E_CHAIN_BROKEN', `cairn verify did not end at the appended head ${head.hash}`);

  const tampered = tamper(await readFile(chainPath, 'utf8'));
  await writeFile(tamperedPath, tampered.text);
  const refused = await cairn(['verify', tamperedPath, '--json']);
  const refusal = JSON.parse(refused.stdout || '{}') as { error?: { code?: string; details?: { firstBadSeq?: number; reason?: string } } };
  if (refused.code !== 1 || refusal.error?.code !== 'E_CHAIN_BROKEN' || refusal.error.details?.firstBadSeq !== tampered.seq) {
    throw cliFailure('cairn verify of the tampered copy', refused);
  }

  const types = receipts.map((r) => r.type);
  process.stdout.write(
    [
      '',
      'Cairn quick start',
      '',
      `  run        ${runId}`,
      `  appended   ${receipts.length} receipts to stream ${config.CAIRN_EVIDENCE_STREAM}, subject ${config.CAIRN_EVIDENCE_SUBJECT_PREFIX}.${runId}`,
      `             ${types[0]} → … → ${types.at(-1)}`,
      `  exported   ${shown(chainPath)}`,
      `  verified   ${verified.stdout.trim()}`,
      `  tampered   ${shown(tamperedPath)}  (step.completed at seq ${tampered.seq}: ${tampered.field})`,
      `             → E_CHAIN_BROKEN at seq ${tampered.seq} (${refusal.error.details.reason ?? '?'}), exit 1`,
      '',
      'Check it yourself — offline, no server needed:',
      `  npx --no-install cairn verify ${shown(chainPath)}`,
      `  npx --no-install cairn verify ${shown(tamperedPath)}   # fails: E_CHAIN_BROKEN, exit 1`,
      'From the evidence log:',
      `  npx --no-install cairn export ${runId}`,
      '  npx --no-install cairn projections rebuild',
      '',
      'This run is a sample appended straight to the evidence log; the services that will produce',
      'such runs (intake, policy, scheduler, runtime, kernel, verifier, grader) are being built.',
      '',
    ].join('\n'),
  );
}

try {
  await main();
} catch (error) {
  const code = isCairnError(error) ? error.code : 'E_INTERNAL';
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`error ${code}: ${message}\n`);
  process.exitCode = 1;
}
