/*
 * The names a Cairn stack's processes share, derived from its stack id (CAIRN_STACK_ID): one
 * definition for `cairn up`, the scheduler, and every harness that tears an isolated stack down.
 */

/** The names an isolated stack uses unless a variable sets them. */
export interface IsolatedNames {
  CAIRN_EVIDENCE_STREAM: string;
  CAIRN_EVIDENCE_SUBJECT_PREFIX: string;
  CAIRN_COMMAND_STREAM: string;
  CAIRN_COMMAND_SUBJECT_PREFIX: string;
  CAIRN_WORKERS_BUCKET: string;
  CAIRN_LEASES_BUCKET: string;
  CAIRN_ARTIFACT_BUCKET: string;
  CAIRN_SECRETS_BUCKET: string;
  CAIRN_WORKER_ID: string;
}

/**
 * The names an isolated stack uses unless a variable sets them; the default stack keeps the
 * services' own defaults (CAIRN_EVIDENCE, cairn.evidence, CAIRN_COMMANDS, …).
 */
export function isolatedNames(stackId: string): IsolatedNames {
  const upper = stackId.toUpperCase().replace(/-/g, '_');
  return {
    CAIRN_EVIDENCE_STREAM: `CAIRN_EVIDENCE_${upper}`,
    CAIRN_EVIDENCE_SUBJECT_PREFIX: `cairn.${stackId}.evidence`,
    CAIRN_COMMAND_STREAM: `CAIRN_COMMANDS_${upper}`,
    CAIRN_COMMAND_SUBJECT_PREFIX: `cairn.${stackId}`,
    CAIRN_WORKERS_BUCKET: `cairn_workers_${stackId}`,
    CAIRN_LEASES_BUCKET: `cairn_leases_${stackId}`,
    CAIRN_ARTIFACT_BUCKET: `cairn_artifacts_${stackId}`,
    CAIRN_SECRETS_BUCKET: `cairn_secrets_${stackId}`,
    CAIRN_WORKER_ID: `local-${stackId}`.slice(0, 64),
  };
}

/** The bucket beside a stack's leases that keeps the scheduler's approval deadlines: isolated wherever its leases are. */
export function approvalsBucketFor(leasesBucket: string): string {
  return `${leasesBucket}_approvals`;
}

/** The bucket beside a stack's leases that holds the scheduler's placement queue: isolated wherever its leases are. */
export function queueBucketFor(leasesBucket: string): string {
  return `${leasesBucket}_queue`;
}

/**
 * The bucket beside a stack's worker registry that keeps operators' drains (ADR 0026): no TTL, so a
 * drain outlives its worker's restart and its registry record's expiry.
 */
export function drainsBucketFor(workersBucket: string): string {
  return `${workersBucket}_drains`;
}
