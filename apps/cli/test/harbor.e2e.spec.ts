import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cairn, harborTaskSubmission } from '@cairn/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';

/*
 * Harbor task directories as missions (docs/missions.md), end to end through the CLI on the real
 * engine, NATS and PostgreSQL: three tasks of this test's own — one the oracle solves (reward 1), one
 * whose test.sh writes 0, one whose task.toml has a bad field (E_INPUT naming it) — each from its
 * directory, then the three as a job with its summary. Their environments build from the local
 * busybox image, once per digest, and the build is on each run's chain.
 */

interface Receipt {
  type: string;
  [field: string]: unknown;
}
interface TaskResult {
  task: string;
  runId: string | null;
  state: string | null;
  reward: number | null;
  passed: boolean;
  errorCode: string | null;
}
interface Summary {
  ok: boolean;
  tasks: number;
  ran: number;
  passed: number;
  passRate: number;
  results: TaskResult[];
}

let stack: TestStack;
let root: string;
let restRoot: string;
/** Each test run builds its own images: this marker is in every Dockerfile, so none are shared. */
const marker = `harbor-e2e-${process.pid}-${Date.now()}`;

async function writeTask(name: string, files: Record<string, string>, under = root): Promise<string> {
  const dir = join(under, name);
  for (const [path, content] of Object.entries(files)) {
    await mkdir(join(dir, path, '..'), { recursive: true });
    await writeFile(join(dir, path), content, { mode: path.endsWith('.sh') ? 0o755 : 0o644 });
  }
  return dir;
}

const DOCKERFILE = `FROM cairn/sandbox-busybox:1\nLABEL io.cairn.test=${marker}\n`;
const TASK_TOML = ['version = "1.0"', '[metadata]', 'difficulty = "easy"', '[verifier]', 'timeout_sec = 30.0', '[agent]', 'timeout_sec = 30.0', '[environment]', 'cpus = 1', 'memory_mb = 128', 'storage_mb = 64', ''].join('\n');
const TEST_SH = ['#!/bin/sh', 'if [ "$(cat /work/answer.txt 2>/dev/null)" = "42" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi', ''].join('\n');

async function cairnJson<T>(args: string[]): Promise<{ code: number | null; json: T; stderr: string }> {
  const cli = await stack.cairn([...args, '--json']);
  try {
    return { code: cli.code, json: JSON.parse(cli.stdout) as T, stderr: cli.stderr };
  } catch {
    throw new Error(`cairn ${args.join(' ')} printed no JSON (exit ${cli.code}):\n${cli.stdout}\n${cli.stderr}\n${await stack.logs()}`);
  }
}

async function receipts(runId: string): Promise<Receipt[]> {
  const response = await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: Receipt[] }).items;
}

async function removeOurImages(): Promise<void> {
  const { createDockerClient } = await import('@cairn/sandbox-docker');
  const docker = createDockerClient();
  for (const image of await docker.listImages({ filters: { label: [`io.cairn.test=${marker}`] } })) {
    await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
  }
}

let passing = '';
let failing = '';
let broken = '';

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'cairn-harbor-'));
  passing = await writeTask('a-passing', {
    'task.toml': TASK_TOML,
    'instruction.md': 'Write 42 into /work/answer.txt.\n',
    'environment/Dockerfile': DOCKERFILE,
    'tests/test.sh': TEST_SH,
    'solution/solve.sh': '#!/bin/sh\necho 42 > /work/answer.txt\n',
  });
  failing = await writeTask('b-failing', {
    'task.toml': TASK_TOML,
    'instruction.md': 'Write 42 into /work/answer.txt.\n',
    'environment/Dockerfile': DOCKERFILE,
    'tests/test.sh': '#!/bin/sh\necho 0 > /logs/verifier/reward.txt\n',
    'solution/solve.sh': '#!/bin/sh\necho 42 > /work/answer.txt\n',
  });
  broken = await writeTask('c-bad-toml', {
    'task.toml': TASK_TOML.replace('cpus = 1', 'cpus = 1\ngpus = 2\nshiny = true'),
    'instruction.md': 'Nothing.\n',
    'environment/Dockerfile': DOCKERFILE,
    'tests/test.sh': TEST_SH,
    'solution/solve.sh': '#!/bin/sh\ntrue\n',
  });
  // A worker that builds contexts of at most 96 KiB: the REST test's oversized one is refused by the worker itself.
  stack = await TestStack.create('harbor-e2e', { CAIRN_BUILD_MAX_CONTEXT_BYTES: String(96 * 1024) });
  expect((await stack.up()).outcome).toBe('started');
}, 240_000);

afterAll(async () => {
  await stack?.dispose();
  await removeOurImages();
  if (root !== undefined) await rm(root, { recursive: true, force: true });
  if (restRoot !== undefined) await rm(restRoot, { recursive: true, force: true });
});

describe('Harbor tasks as missions', () => {
  it('runs a task with --oracle: its environment is built from the local base, its reward 1 is the grade, the build is on the chain', async () => {
    const { code, json } = await cairnJson<Summary>(['run', passing, '--oracle']);
    expect(code).toBe(0);
    const result = json.results[0]!;
    expect(result).toMatchObject({ task: 'a-passing', state: 'SEALED', reward: 1, passed: true, errorCode: null });
    const chain = await receipts(result.runId!);
    const submitted = chain.find((r) => r.type === 'run.submitted') as unknown as { spec: { image: string; imageBuild: { imageId: string; bases: { ref: string; id: string }[]; digest: string; dockerfileSha256: string } } };
    expect(submitted.spec.image).toMatch(/^cairn\/built:[0-9a-f]{16}@sha256:[0-9a-f]{64}$/);
    expect(submitted.spec.image.endsWith(`@${submitted.spec.imageBuild.imageId}`)).toBe(true);
    expect(submitted.spec.imageBuild.bases.map((b) => b.ref)).toEqual(['cairn/sandbox-busybox:1']);
    const created = chain.find((r) => r.type === 'sandbox.created') as unknown as { image_digest: string };
    expect(created.image_digest).toBe(submitted.spec.imageBuild.imageId);
    const grade = chain.find((r) => r.type === 'grade.recorded') as unknown as { score: number; max_score: number; criteria: { kind: string }[] };
    expect(grade).toMatchObject({ score: 1, max_score: 1, criteria: [{ id: 'reward', kind: 'reward', earned: 1, scored: true }] });
    // The tests are in the image's read-only root; the agent step could not have changed them.
    expect(chain.filter((r) => r.type === 'step.completed').map((r) => r.exit_code)).toEqual([0, 0, 0]);
  });

  it('runs a task whose test.sh writes 0: sealed with reward 0, not passed', async () => {
    const { code, json } = await cairnJson<Summary>(['run', failing, '--oracle']);
    expect(code).toBe(0);
    expect(json.results[0]).toMatchObject({ task: 'b-failing', state: 'SEALED', reward: 0, passed: false });
  });

  it('refuses a task.toml with a bad or unknown field as E_INPUT naming it, and a task without --oracle or --agent', async () => {
    const bad = await cairnJson<{ ok: false; error: { code: string; message: string } }>(['run', broken, '--oracle']);
    expect(bad.code).toBe(2);
    expect(bad.json.error.code).toBe('E_INPUT');
    expect(bad.json.error.message).toContain('environment.gpus');
    expect(bad.json.error.message).toContain('environment.shiny: unknown field');
    const noAgent = await cairnJson<{ ok: false; error: { code: string; message: string } }>(['run', passing]);
    expect(noAgent.code).toBe(2);
    expect(noAgent.json.error).toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('needs --oracle') as unknown });
  });

  it('runs a directory of tasks as a job: each task once, a summary with the pass rate, exit 1 since one did not run', async () => {
    const { code, json } = await cairnJson<Summary>(['run', root, '--oracle']);
    expect(code).toBe(1);
    expect(json).toMatchObject({ tasks: 3, ran: 2, passed: 1 });
    expect(json.passRate).toBeCloseTo(1 / 3);
    expect(json.results.map((r) => [r.task, r.state, r.reward, r.passed, r.errorCode])).toEqual([
      ['a-passing', 'SEALED', 1, true, null],
      ['b-failing', 'SEALED', 0, false, null],
      ['c-bad-toml', null, null, false, 'E_INPUT'],
    ]);
    for (const result of json.results.slice(0, 2)) expect(result.runId).toMatch(/^run_/);
  });
});

describe('cairn images build --file', () => {
  it('builds from the local base, caches by digest (the second build is a hit with the same id), and refuses a FROM that is not local', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-dockerfile-'));
    try {
      await writeFile(join(dir, 'Dockerfile'), `FROM cairn/sandbox-busybox:1\nLABEL io.cairn.test=${marker}\nCOPY note.txt /opt/note.txt\n`);
      await writeFile(join(dir, 'note.txt'), marker);
      type Built = { ok: true; image: { tag: string; id: string; digest: string; cached: boolean; bases: { ref: string; id: string }[] } };
      const first = await cairnJson<Built>(['images', 'build', '--file', join(dir, 'Dockerfile')]);
      expect(first.code).toBe(0);
      expect(first.json.image).toMatchObject({ cached: false, bases: [{ ref: 'cairn/sandbox-busybox:1' }] });
      const second = await cairnJson<Built>(['images', 'build', '--file', join(dir, 'Dockerfile')]);
      expect(second.json.image).toMatchObject({ cached: true, id: first.json.image.id, digest: first.json.image.digest });

      await writeFile(join(dir, 'Dockerfile.remote'), `FROM docker.io/library/${marker}:latest\nRUN true\n`);
      const refused = await cairnJson<{ ok: false; error: { code: string; message: string } }>(['images', 'build', '--file', join(dir, 'Dockerfile.remote')]);
      expect(refused.code).toBe(2);
      expect(refused.json.error).toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('not an image on this engine') as unknown });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('Harbor tasks over REST (POST /v1/missions/harbor) and the TypeScript SDK', () => {
  type Refusal = { code: string; message: string };
  let readyImage = '';

  async function post(body: unknown, key = `harbor-${Math.random().toString(36).slice(2)}`): Promise<{ status: number; json: Partial<Refusal> }> {
    const response = await stack.api('/v1/missions/harbor', { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': key }, body: typeof body === 'string' ? body : JSON.stringify(body) });
    return { status: response.status, json: (await response.json()) as Partial<Refusal> };
  }

  async function runCount(): Promise<number> {
    const response = await stack.api('/v1/runs?limit=200');
    expect(response.status).toBe(200);
    return ((await response.json()) as { items: unknown[] }).items.length;
  }

  async function ourImages(): Promise<string[]> {
    const { createDockerClient } = await import('@cairn/sandbox-docker');
    return (await createDockerClient().listImages({ filters: { label: [`io.cairn.test=${marker}`] } })).map((image) => image.Id).sort();
  }

  beforeAll(async () => {
    restRoot = await mkdtemp(join(tmpdir(), 'cairn-harbor-rest-'));
    // An image made ready for Harbor tasks by an operator before workers built tasks' environments (ADR 0034): still usable as a base.
    const file = join(restRoot, 'Dockerfile.ready');
    await writeFile(file, `FROM cairn/sandbox-busybox:1\nLABEL io.cairn.test=${marker}\nUSER 0:0\nRUN ["/bin/sh", "-c", "ln -sfn /out/harbor-logs /logs && ln -sfn /work/harbor/tests /tests && ln -sfn /work/harbor/solution /solution"]\n`);
    const built = await cairnJson<{ image: { tag: string; id: string } }>(['images', 'build', '--file', file]);
    expect(built.code).toBe(0);
    readyImage = `${built.json.image.tag}@${built.json.image.id}`;
  }, 120_000);

  it('builds a task on an image made ready for Harbor tasks before (its /tests link is replaced by the tests): the same mapping as cairn run, its reward 1 the grade; the same key answers the same run', async () => {
    const dir = await writeTask('rest-passing', {
      'task.toml': TASK_TOML,
      'instruction.md': 'Write 42 into /work/answer.txt.\n',
      // By its tag: the engine's builder takes no image id in a FROM.
      'environment/Dockerfile': `# made ready once: docs/missions.md\nFROM ${readyImage.split('@')[0]!}\n`,
      'tests/test.sh': TEST_SH,
      'solution/solve.sh': '#!/bin/sh\necho 42 > /work/answer.txt\n',
    }, restRoot);
    const client = new Cairn({ url: stack.url, apiKey: stack.apiKey });
    const submission = await harborTaskSubmission(dir, { oracle: true });
    expect(submission.files.map((f) => f.path)).toEqual(['task.toml', 'instruction.md', 'environment/Dockerfile', 'tests/test.sh', 'solution/solve.sh']);
    const first = await client.runs.submitHarborTask(submission, { idempotencyKey: `harbor-rest-${marker}` });
    expect(first).toMatchObject({ state: 'SUBMITTED', duplicate: false, workerId: stack.names.workerId });
    const again = await client.runs.submitHarborTask(submission, { idempotencyKey: `harbor-rest-${marker}` });
    expect(again).toMatchObject({ runId: first.runId, duplicate: true, image: first.image, imageBuild: { imageId: first.imageBuild.imageId, cached: true } });
    const run = await stack.waitForRun(first.runId, (r) => r.sealed || ['FAILED', 'ROLLBACK', 'REJECTED', 'CANCELLED'].includes(r.state), 120_000);
    expect(run).toMatchObject({ state: 'SEALED', score: 1, maxScore: 1, name: 'harbor: rest-passing' });
    const chain = await receipts(first.runId);
    const submitted = chain.find((r) => r.type === 'run.submitted') as unknown as { spec: { image: string; files: { path: string }[]; imageBuild: { bases: { id: string }[] } } };
    expect(submitted.spec.image).toBe(first.image);
    expect(submitted.spec.imageBuild.bases.map((b) => b.id)).toEqual([readyImage.split('@')[1]]);
    expect(submitted.spec.files.map((f) => f.path)).toEqual(['/work/harbor/instruction.md', '/work/harbor/solution/solve.sh']);
    expect(chain.filter((r) => r.type === 'step.completed').map((r) => r.exit_code)).toEqual([0, 0, 0]);
  }, 180_000);

  it('has a worker build a Dockerfile with a RUN line and a context: the run seals with reward 1 on the image the chain records, a second submit is cached (no second build), and the agent step cannot change /tests', async () => {
    const label = `${marker}-worker-built`;
    const dockerfile = `FROM cairn/sandbox-busybox:1\nLABEL io.cairn.test=${marker} io.cairn.test.case=${label}\nCOPY note.txt /opt/note.txt\nUSER 0:0\nRUN ["/bin/sh", "-c", "cp /opt/note.txt /opt/note.copy"]\n`;
    // Reward 1 only when the answer is there and the build's RUN line ran.
    const testSh = ['#!/bin/sh', `if [ "$(cat /work/answer.txt 2>/dev/null)" = "42" ] && [ "$(cat /opt/note.copy)" = "${label}" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi`, ''].join('\n');
    // The tampering agent writes no answer and tries to make the verifier give 1 anyway.
    const tamper = ['#!/bin/sh', 'for t in /tests/test.sh /tests; do', '  if (printf "#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n" > /tests/test.sh) 2>/dev/null || rm -rf "$t" 2>/dev/null; then echo "changed $t"; else echo "refused $t"; fi', 'done', 'exit 0', ''].join('\n');
    const common = { 'task.toml': TASK_TOML, 'instruction.md': 'Write 42 into /work/answer.txt.\n', 'environment/Dockerfile': dockerfile, 'environment/note.txt': label, 'tests/test.sh': testSh };
    const passingDir = await writeTask('rest-built', { ...common, 'solution/solve.sh': '#!/bin/sh\necho 42 > /work/answer.txt\n' }, restRoot);
    const tamperDir = await writeTask('rest-tamper', { ...common, 'solution/solve.sh': tamper }, restRoot);
    const client = new Cairn({ url: stack.url, apiKey: stack.apiKey });
    const { createDockerClient } = await import('@cairn/sandbox-docker');
    const docker = createDockerClient();
    const builtHere = async () => (await docker.listImages({ filters: { label: [`io.cairn.test.case=${label}`] } })).map((i) => i.Id);

    const first = await client.runs.submitHarborTask(await harborTaskSubmission(passingDir, { oracle: true }));
    expect(first).toMatchObject({ duplicate: false, workerId: stack.names.workerId, imageBuild: { cached: false, bases: [{ ref: 'cairn/sandbox-busybox:1' }] } });
    expect(first.image).toMatch(/^cairn\/built:[0-9a-f]{16}@sha256:[0-9a-f]{64}$/);
    expect(first.image.endsWith(`@${first.imageBuild.imageId}`)).toBe(true);
    expect(await builtHere()).toEqual([first.imageBuild.imageId]);
    // The same task under another key: a new run on the same image, found built.
    const second = await client.runs.submitHarborTask(await harborTaskSubmission(passingDir, { oracle: true }));
    expect(second).toMatchObject({ duplicate: false, image: first.image, imageBuild: { imageId: first.imageBuild.imageId, digest: first.imageBuild.digest, cached: true } });
    expect(second.runId).not.toBe(first.runId);
    expect(await builtHere()).toEqual([first.imageBuild.imageId]);

    for (const accepted of [first, second]) {
      const run = await stack.waitForRun(accepted.runId, (r) => r.sealed || ['FAILED', 'ROLLBACK', 'REJECTED', 'CANCELLED'].includes(r.state), 120_000);
      expect(run).toMatchObject({ state: 'SEALED', score: 1, maxScore: 1, name: 'harbor: rest-built' });
      const chain = await receipts(accepted.runId);
      const submitted = chain.find((r) => r.type === 'run.submitted') as unknown as { spec: { image: string; files: { path: string }[]; imageBuild: { imageId: string; digest: string } } };
      expect(submitted.spec.image).toBe(first.image);
      expect(submitted.spec.imageBuild).toMatchObject({ imageId: first.imageBuild.imageId, digest: first.imageBuild.digest, cached: accepted === first ? false : true });
      // The tests are in the image, not among the input files the agent's /work holds.
      expect(submitted.spec.files.map((f) => f.path)).toEqual(['/work/harbor/instruction.md', '/work/harbor/solution/solve.sh']);
      const created = chain.find((r) => r.type === 'sandbox.created') as unknown as { image_digest: string };
      expect(created.image_digest).toBe(first.imageBuild.imageId);
    }

    const tampered = await client.runs.submitHarborTask(await harborTaskSubmission(tamperDir, { oracle: true }));
    const run = await stack.waitForRun(tampered.runId, (r) => r.sealed || ['FAILED', 'ROLLBACK', 'REJECTED', 'CANCELLED'].includes(r.state), 120_000);
    // The agent's step ran and exited 0, and the verifier still ran the task's own test.sh: reward 0.
    expect(run).toMatchObject({ state: 'SEALED', score: 0, maxScore: 1 });
    const steps = (await receipts(tampered.runId)).filter((r) => r.type === 'step.completed').map((r) => r.exit_code);
    expect(steps).toEqual([0, 0, 0]);
    const stdout = await stack.api(`/v1/runs/${tampered.runId}/steps/1/stdout`);
    expect(stdout.status).toBe(200);
    expect(await stdout.text()).toBe('refused /tests/test.sh\nrefused /tests\n');
  }, 300_000);

  it('builds an image through POST /v1/images/builds (the SDK\'s images.build): by a worker, cached by digest, a FROM no worker has refused E_INPUT', async () => {
    const client = new Cairn({ url: stack.url, apiKey: stack.apiKey });
    const label = `${marker}-images-build`;
    const dockerfile = `FROM cairn/sandbox-busybox:1\nLABEL io.cairn.test=${marker} io.cairn.test.case=${label}\nCOPY bin/hello.sh /opt/hello.sh\nUSER 0:0\nRUN ["/opt/hello.sh"]\n`;
    const files = [{ path: 'bin/hello.sh', content: '#!/bin/sh\necho hello > /opt/hello.txt\n', mode: 0o755 }];
    const built = await client.images.build(dockerfile, files);
    expect(built).toMatchObject({ workerId: stack.names.workerId, imageBuild: { cached: false, bases: [{ ref: 'cairn/sandbox-busybox:1' }] } });
    expect(built.image).toBe(`${built.tag}@${built.imageBuild.imageId}`);
    const again = await client.images.build(dockerfile, files);
    expect(again).toMatchObject({ image: built.image, imageBuild: { cached: true, digest: built.imageBuild.digest } });
    const { createDockerClient } = await import('@cairn/sandbox-docker');
    const found = await createDockerClient().listImages({ filters: { label: [`io.cairn.test.case=${label}`] } });
    expect(found.map((i) => i.Id)).toEqual([built.imageBuild.imageId]);
    await expect(client.images.build(`FROM docker.io/library/${marker}:latest\nRUN true\n`)).rejects.toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('not an image on this engine') as unknown });
    // Over the worker's context limit (96 KiB here): refused by it, nothing fetched.
    await expect(client.images.build('FROM cairn/sandbox-busybox:1\n', [{ path: 'blob.bin', content: new Uint8Array(100 * 1024) }])).rejects.toMatchObject({ code: 'E_TOO_LARGE' });
  }, 120_000);

  it('refuses hostile and bad uploads with the precise code, and makes no run and no image', async () => {
    const runsBefore = await runCount();
    const imagesBefore = await ourImages();
    const b64 = (text: string) => Buffer.from(text).toString('base64');
    const good = [
      { path: 'task.toml', content: b64(TASK_TOML) },
      { path: 'instruction.md', content: b64('x\n') },
      { path: 'environment/Dockerfile', content: b64(`FROM cairn/sandbox-busybox:1\nLABEL io.cairn.test=${marker}\nRUN ["/bin/sh", "-c", "true"]\n`) },
      { path: 'tests/test.sh', content: b64(TEST_SH), mode: 0o755 },
      { path: 'solution/solve.sh', content: b64('#!/bin/sh\ntrue\n'), mode: 0o755 },
    ];
    const cases: [string, unknown, number, string, string][] = [
      ['path traversal', { files: [...good, { path: 'tests/../../etc/passwd', content: b64('x') }], oracle: true }, 400, 'E_INPUT', 'no traversal'],
      ['an absolute path', { files: [...good, { path: '/etc/cron.d/x', content: b64('x') }], oracle: true }, 400, 'E_INPUT', 'an absolute path'],
      ['a symlink', { files: [...good, { path: 'tests/link', content: b64('/etc/shadow'), mode: 0o120777 }], oracle: true }, 400, 'E_INPUT', 'only regular files'],
      ['too many files', { files: [...good, ...Array.from({ length: 260 }, (_, i) => ({ path: `tests/f${i}`, content: '' }))], oracle: true }, 400, 'E_INPUT', 'files'],
      ['a bad task.toml', { files: good.map((f) => (f.path === 'task.toml' ? { path: f.path, content: b64('[environment]\ngpus = 2\n') } : f)), oracle: true }, 400, 'E_INPUT', 'environment.gpus'],
      ['a FROM of an image no worker has', { files: good.map((f) => (f.path === 'environment/Dockerfile' ? { path: f.path, content: b64(`FROM docker.io/library/${marker}:latest\nRUN touch /x\n`) } : f)), oracle: true }, 400, 'E_INPUT', `FROM docker.io/library/${marker}:latest is not an image on this engine`],
      ['a FROM with a variable', { files: good.map((f) => (f.path === 'environment/Dockerfile' ? { path: f.path, content: b64('ARG BASE\nFROM ${BASE}\n') } : f)), oracle: true }, 400, 'E_INPUT', 'uses a variable'],
      // Past the worker's context limit (CAIRN_BUILD_MAX_CONTEXT_BYTES, 96 KiB here) though within the upload's: the worker refuses it, fetching nothing.
      ['a context past the worker\'s limit', { files: [...good, { path: 'environment/blob.bin', content: Buffer.alloc(100 * 1024, 7).toString('base64') }], oracle: true }, 413, 'E_TOO_LARGE', 'builds at most 98304'],
      ['neither oracle nor agent', { files: good }, 400, 'E_INPUT', 'exactly one'],
      ['an agent as a shell string', { files: good, agent: 'python3 agent.py' }, 400, 'E_INPUT', 'agent'],
      ['a file outside the task layout', { files: [...good, { path: 'notes/x', content: b64('x') }], oracle: true }, 400, 'E_INPUT', 'not part of a Harbor task'],
    ];
    for (const [what, body, status, code, text] of cases) {
      const answer = await post(body);
      expect({ what, status: answer.status, code: answer.json.code }).toEqual({ what, status, code });
      expect(answer.json.message, what).toContain(text);
    }
    // Oversize: past the body limit before it is parsed.
    const huge = await post({ files: [...good, { path: 'tests/big.bin', content: 'A'.repeat(1_200_000) }], oracle: true });
    expect({ status: huge.status, code: huge.json.code }).toEqual({ status: 413, code: 'E_TOO_LARGE' });
    // A symlink on disk is refused by the SDK before anything is sent.
    const linked = await writeTask('rest-symlink', { 'task.toml': TASK_TOML, 'instruction.md': 'x\n', 'environment/Dockerfile': 'FROM cairn/sandbox-busybox:1\n', 'tests/test.sh': TEST_SH }, restRoot);
    await symlink('/etc/passwd', join(linked, 'tests', 'passwd'));
    await expect(harborTaskSubmission(linked, { oracle: true })).rejects.toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('only files and directories') as unknown });
    expect(await runCount()).toBe(runsBefore);
    expect(await ourImages()).toEqual(imagesBefore);
  }, 120_000);
});
