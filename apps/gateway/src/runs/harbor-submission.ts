import { CairnError, HarborTaskSubmissionSchema, inputIssues, MAX_HARBOR_TASK_BYTES, MAX_HARBOR_TASK_FILES } from '@cairn/contracts';
import type { HarborTaskSubmission, RunSpec } from '@cairn/contracts';
import { harborRunSpec, harborTaskFromFiles, prebuiltEnvironmentImage } from '@cairn/harbor';

/*
 * `POST /v1/missions/harbor` (docs/adr/0034): the upload checked against the contracts, the files
 * decoded, then the mapping `cairn run <task-dir>` uses. Pure: the controller publishes what this
 * returns, and nothing when it throws.
 */

/** The RunSpec a Harbor task submission makes, or E_INPUT naming what is wrong with it. */
export function harborSpecOf(body: unknown): RunSpec {
  const parsed = HarborTaskSubmissionSchema.safeParse(body);
  if (!parsed.success) {
    const issues = inputIssues(parsed.error);
    throw new CairnError('E_INPUT', `the Harbor task: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
  }
  const submission: HarborTaskSubmission = parsed.data;
  const files = submission.files.map((file) => ({ path: file.path, content: new Uint8Array(Buffer.from(file.content, 'base64')), mode: file.mode ?? 0o644 }));
  const task = harborTaskFromFiles(files, { where: 'upload', name: submission.name ?? 'harbor-task', limits: { files: MAX_HARBOR_TASK_FILES, bytes: MAX_HARBOR_TASK_BYTES } });
  const image = prebuiltEnvironmentImage(task);
  return harborRunSpec(task, { image, layout: 'prebuilt' }, submission.agent === undefined ? { kind: 'oracle' } : { kind: 'agent', argv: submission.agent }, submission.job);
}
