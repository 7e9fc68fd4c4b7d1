import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { Readable } from 'node:stream';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HARBOR_PREBUILT_LINKS } from '@cairn/harbor';
import { DEFAULT_POLICY } from '@cairn/policy';
import { BUSYBOX_IMAGE_TAG, createDockerClient, ensureBusyboxImage } from '@cairn/sandbox-docker';
import { uniqueName } from '@cairn/testing';
import tar from 'tar-stream';
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

/**
 * Inspect's `bash()` tool runs `bash --login -c …`; the minimal image has busybox's shell only. The
 * mock-model eval runs in an image of the test's own, built on it (offline, in a second): the same
 * busybox, with `bash` starting its `ash`. It is removed at the end.
 */
const BASH_SHIM = '#!/bin/sh\n# Inspect\'s bash() tool runs `bash --login -c`: here that is busybox\'s ash.\nexec /bin/ash "$@"\n';

/**
 * The base of the SDK's Harbor tasks: a worker builds each task's environment on it (docs/adr/0038).
 * Labelled with the run's suffix, which the images built from it inherit: all of them are removed at
 * the end. It is made ready for Harbor tasks the older way (ADR 0034's links), which a build replaces.
 */
const HARBOR_READY = `USER 0:0\nRUN ["/bin/sh", "-c", "${HARBOR_PREBUILT_LINKS}"]\n`;
const TEST_LABEL = 'io.cairn.test';

async function buildInspectImage(tag: string, harborTag: string, label: string): Promise<void> {
  const docker = createDockerClient();
  await ensureBusyboxImage({ docker });
  await buildImage(docker, tag, `FROM ${BUSYBOX_IMAGE_TAG}\nCOPY bash /bin/bash\n`, { bash: BASH_SHIM });
  await buildImage(docker, harborTag, `FROM ${BUSYBOX_IMAGE_TAG}\nLABEL ${TEST_LABEL}=${label}\n${HARBOR_READY}`, {});
}

async function buildImage(docker: ReturnType<typeof createDockerClient>, tag: string, dockerfile: string, files: Record<string, string>): Promise<void> {
  const pack = tar.pack();
  pack.entry({ name: 'Dockerfile', mode: 0o644 }, dockerfile);
  for (const [name, content] of Object.entries(files)) pack.entry({ name, mode: 0o755 }, content);
  pack.finalize();
  const stream = await docker.buildImage(Readable.from(pack), { t: tag, rm: true, forcerm: true, networkmode: 'none' });
  await new Promise<void>((resolve, reject) => {
    docker.modem.followProgress(stream, (error: Error | null, output: { error?: string }[]) => {
      const failed = error ?? output.find((line) => line.error !== undefined)?.error;
      if (failed) reject(failed instanceof Error ? failed : new Error(failed));
      else resolve();
    });
  });
}

async function main(): Promise<number> {
  if (!existsSync(PYTHON)) {
    process.stderr.write('[python] no .venv: run `bash tools/ensure-python.sh` first (npm run test:python does)\n');
    return 1;
  }
  const started = performance.now();
  const scratch = await mkdtemp(join(tmpdir(), 'cairn-pysdk-'));
  const suffix = uniqueName('t').toLowerCase().replace(/[^a-z0-9_.-]/g, '-');
  const image = `cairn/inspect-busybox:${suffix}`;
  const harborImage = `cairn/harbor-busybox:${suffix}`;
  await buildInspectImage(image, harborImage, suffix);
  // The default policy, with the eval's image and the Harbor tasks' allowed too.
  const policyFile = join(scratch, 'policy.json');
  await writeFile(policyFile, JSON.stringify({ ...DEFAULT_POLICY, images: { allow: [...DEFAULT_POLICY.images.allow, { name: image }, { name: harborImage }] } }));
  // Room for the Inspect checks' sandboxes (one per check) beside the SDK tests' own.
  const stack = await startBenchStack('pysdk', { CAIRN_WORKER_SLOTS: '6', CAIRN_POLICY_FILE: policyFile }).catch(async (error: unknown) => {
    await cleanUp([image, harborImage], scratch, suffix);
    throw error;
  });
  process.stderr.write(`[python] stack ${stack.stackId} at ${stack.url} (up in ${Math.round(performance.now() - started)} ms)\n`);
  try {
    return await new Promise<number>((resolve, reject) => {
      const args = process.argv.slice(2);
      // pytest's temporary directories (the chains, the Inspect logs) go in the scratch, removed at the end.
      const pytestArgs = ['-m', 'pytest', `--basetemp=${join(scratch, 'pytest')}`, ...(args.some((arg) => !arg.startsWith('-')) ? args : ['sdk/python/tests', '-v', ...args])];
      const child = spawn(PYTHON, pytestArgs, {
        cwd: REPO,
        stdio: 'inherit',
        env: { ...process.env, ...stack.env, CAIRN_URL: stack.url, CAIRN_API_KEY: stack.apiKey, CAIRN_TEST_INSPECT_IMAGE: image, CAIRN_TEST_HARBOR_IMAGE: harborImage, NO_COLOR: '1' },
      });
      child.once('error', reject);
      child.once('close', (code) => resolve(code ?? 1));
    });
  } finally {
    await stack.close();
    await cleanUp([image, harborImage], scratch, suffix);
    process.stderr.write(`[python] done in ${Math.round((performance.now() - started) / 1000)} s\n`);
  }
}

async function cleanUp(images: readonly string[], scratch: string, label: string): Promise<void> {
  // The images the workers built from the Harbor base first (they carry its label), then the named ones.
  const built = await createDockerClient().listImages({ filters: { label: [`${TEST_LABEL}=${label}`] } }).catch(() => []);
  for (const image of [...built.map((b) => b.Id).filter((id) => !images.includes(id)), ...images]) {
    await createDockerClient()
      .getImage(image)
      .remove({ force: true })
      .catch(() => undefined);
  }
  await rm(scratch, { recursive: true, force: true });
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
