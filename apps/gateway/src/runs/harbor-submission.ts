import { CairnError, HarborTaskSubmissionSchema, inputIssues, MAX_BUILD_TIMEOUT_SECONDS, MAX_HARBOR_TASK_BYTES, MAX_HARBOR_TASK_FILES, parseRunSpec } from '@cairn/contracts';
import type { BuiltImage, HarborTaskSubmission, ImageBuild, RunSpec } from '@cairn/contracts';
import { harborBuildContext, harborRunSpec, harborTaskFromFiles } from '@cairn/harbor';
import type { AgentStep, HarborTask } from '@cairn/harbor';
import { dockerfileBases } from '@cairn/sandbox';
import { findLiteralKeys } from '@cairn/secrets';

/*
 * `POST /v1/missions/harbor` (docs/adr/0034, 0038): the upload checked against the contracts, the
 * files decoded, the build a worker is asked for, then the mapping `cairn run <task-dir>` uses with
 * the image the worker built. Pure: the controller sends the build and publishes what this returns,
 * and nothing when it throws.
 */

/** A task sent over REST, checked: what to build, and how to run it once built. */
export interface HarborUpload {
  task: HarborTask;
  agent: AgentStep;
  job: string | undefined;
  build: {
    dockerfile: string;
    files: { path: string; content: Uint8Array; mode: number }[];
    /** The images the Dockerfile's FROM lines name (a variable in one is E_INPUT here already). */
    bases: string[];
    /** task.toml's `[environment] build_timeout_sec`, rounded up, at most an hour; absent: the worker's limit. */
    timeoutSeconds: number | undefined;
  };
}

/**
 * A build is given no secret, and none may ride in it: a key in the context (the Dockerfile too)
 * would be in the image. E_INPUT naming the files, never what they hold.
 */
export function assertNoCredentials(files: readonly { path: string; content: Uint8Array }[], what: string): void {
  const keys = findLiteralKeys({ files: files.map((file) => ({ path: file.path, content: Buffer.from(file.content).toString('base64'), encoding: 'base64' })) });
  if (keys.length === 0) return;
  const named = [...new Set(keys.map((key) => files[Number(/files\[(\d+)\]/.exec(key.path)?.[1] ?? -1)]?.path ?? key.path))];
  throw new CairnError('E_INPUT', `${what} holds what looks like a credential (${named.join(', ')}): a secret belongs in the secret store, never in an image`, { paths: named });
}

const STAND_IN_IMAGE = `cairn/built:0000000000000000@sha256:${'0'.repeat(64)}`;

/** The task a Harbor task submission makes and the build it needs, or E_INPUT naming what is wrong with it. */
export function harborUploadOf(body: unknown): HarborUpload {
  const parsed = HarborTaskSubmissionSchema.safeParse(body);
  if (!parsed.success) {
    const issues = inputIssues(parsed.error);
    throw new CairnError('E_INPUT', `the Harbor task: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
  }
  const submission: HarborTaskSubmission = parsed.data;
  const files = submission.files.map((file) => ({ path: file.path, content: new Uint8Array(Buffer.from(file.content, 'base64')), mode: file.mode ?? 0o644 }));
  const task = harborTaskFromFiles(files, { where: 'upload', name: submission.name ?? 'harbor-task', limits: { files: MAX_HARBOR_TASK_FILES, bytes: MAX_HARBOR_TASK_BYTES } });
  const context = harborBuildContext(task);
  const bases = dockerfileBases(context.dockerfile);
  assertNoCredentials(context.files, "the Harbor task's build context");
  const agent: AgentStep = submission.agent === undefined ? { kind: 'oracle' } : { kind: 'agent', argv: submission.agent };
  // Mapped once now, on a stand-in image, so a task that cannot run (no solve.sh, bad caps) is refused before anything is built.
  harborRunSpec(task, { image: STAND_IN_IMAGE, layout: 'built' }, agent, submission.job);
  const buildTimeout = task.config.environment?.build_timeout_sec;
  return {
    task,
    agent,
    job: submission.job,
    build: {
      dockerfile: context.dockerfile,
      files: context.files,
      bases,
      timeoutSeconds: buildTimeout === undefined ? undefined : Math.min(MAX_BUILD_TIMEOUT_SECONDS, Math.max(1, Math.ceil(buildTimeout))),
    },
  };
}

/** The image a worker built, as the RunSpec names and records it. */
export function imageBuildOf(built: BuiltImage): { image: string; imageBuild: ImageBuild } {
  return {
    image: `${built.tag}@${built.image_id}`,
    imageBuild: { digest: built.digest, dockerfileSha256: built.dockerfile_sha256, bases: built.bases, imageId: built.image_id, cached: built.cached },
  };
}

/** The run of an uploaded task on the image built for it: the tests in its read-only root, the build on the chain. */
export function harborSpecOf(upload: HarborUpload, built: BuiltImage): RunSpec {
  const { image, imageBuild } = imageBuildOf(built);
  return parseRunSpec({ ...harborRunSpec(upload.task, { image, layout: 'built' }, upload.agent, upload.job), imageBuild });
}
