import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  approvalsBucketFor,
  drainsBucketFor,
  ArtifactStoreConfigSchema,
  DEFAULT_ARTIFACT_BUCKET,
  DEFAULT_EVIDENCE_STREAM,
  DEFAULT_EVIDENCE_SUBJECT_PREFIX,
  DEFAULT_SECRETS_BUCKET,
  EvidenceLogConfigSchema,
  isolatedNames,
  loadConfig,
  NATS_SERVICES,
  natsPermissionsFor,
  OPERATOR_PERMISSIONS,
  queueBucketFor,
  renderAuthorization,
  SecretCatalogConfigSchema,
  TlogConfigSchema,
  tlogNames,
} from '@cairn/config';
import type { NatsService, NatsUser, StackNatsNames } from '@cairn/config';
import { NatsArtifactStore } from '@cairn/artifact-store';
import { TransparencyLog } from '@cairn/tlog';
import { CairnError } from '@cairn/contracts';
import { stackLocation, stackServiceConfig } from './stack-config.js';
import { ensureHome } from './stack-file.js';
import { connectNats, ensureNatsSeedFile, EvidenceLog, evidenceLogOptionsFromConfig } from '@cairn/evidence-log';
import {
  APPROVAL_DEADLINES_LIMITS,
  CommandBus,
  commandBusOptionsFromConfig,
  DEFAULT_COMMAND_STREAM,
  DEFAULT_COMMAND_SUBJECT_PREFIX,
  DEFAULT_LEASES_BUCKET,
  DEFAULT_WORKERS_BUCKET,
  LeaseStore,
  OperationalConfigSchema,
  openBucket,
  PlacementQueue,
  WorkerDrains,
  WorkerRegistry,
} from '@cairn/operational';

/*
 * Per-service NATS users for a stack (docs/adr/0022): an nkey seed per service and one for the
 * operator under `<home>/nats/` (mode 0600 each), and `auth.conf`, the nats-server `authorization`
 * block naming their public keys and each one's permissions (derived from SERVICE_ROUTES), for the
 * operator's server to include. `cairn up --nats-auth` then hands each service its own file and
 * makes every stream and bucket with the operator's user, since no service may.
 */

/** The operator's user: `cairn up`, `cairn export`, `cairn log migrate`. */
export const OPERATOR_USER = 'operator';
/** The directory under the stack's home. */
export const NATS_AUTH_DIR = 'nats';
export const NATS_AUTH_INCLUDE = 'auth.conf';

export interface StackNatsAuth {
  dir: string;
  /** The authorization include for the server (no secret in it: public keys only). */
  include: string;
  /** The credentials file of each user (mode 0600). */
  files: Record<NatsService | typeof OPERATOR_USER, string>;
  /** Users whose seed was made now. */
  created: string[];
}

/** Where the stack's credentials live. */
export function natsCredsFileOf(home: string, user: NatsService | typeof OPERATOR_USER): string {
  return join(home, NATS_AUTH_DIR, `${user}.nk`);
}

/** The worker id a stack's runtime runs as: the configured one, else the one its state directory keeps, else the stack's own. */
export async function stackWorkerId(config: Record<string, string>, stackId: string): Promise<string> {
  if (config.CAIRN_WORKER_ID !== undefined) return config.CAIRN_WORKER_ID;
  // The runtime's own file (`worker-id`, apps/runtime): a worker that ran before keeps its id.
  const kept = config.CAIRN_WORKER_STATE_DIR === undefined ? null : await readFile(join(config.CAIRN_WORKER_STATE_DIR, 'worker-id'), 'utf8').catch(() => null);
  return kept?.trim() || isolatedNames(stackId).CAIRN_WORKER_ID;
}

function stackTlogNames(config: Record<string, string>): StackNatsNames['tlog'] {
  return tlogNames(loadConfig(EvidenceLogConfigSchema.extend(TlogConfigSchema.shape), config));
}

/** The names the stack's services resolve from `config` (the same defaults they use). */
export function stackNatsNames(config: Record<string, string>, stackId: string): StackNatsNames {
  const leases = config.CAIRN_LEASES_BUCKET ?? DEFAULT_LEASES_BUCKET;
  const workers = config.CAIRN_WORKERS_BUCKET ?? DEFAULT_WORKERS_BUCKET;
  return {
    evidenceStream: config.CAIRN_EVIDENCE_STREAM ?? DEFAULT_EVIDENCE_STREAM,
    evidencePrefix: config.CAIRN_EVIDENCE_SUBJECT_PREFIX ?? DEFAULT_EVIDENCE_SUBJECT_PREFIX,
    commandStream: config.CAIRN_COMMAND_STREAM ?? DEFAULT_COMMAND_STREAM,
    commandPrefix: config.CAIRN_COMMAND_SUBJECT_PREFIX ?? DEFAULT_COMMAND_SUBJECT_PREFIX,
    buckets: {
      workers,
      leases,
      approvals: config.CAIRN_APPROVALS_BUCKET ?? approvalsBucketFor(leases),
      queue: config.CAIRN_QUEUE_BUCKET ?? queueBucketFor(leases),
      drains: drainsBucketFor(workers),
      secrets: config.CAIRN_SECRETS_BUCKET ?? DEFAULT_SECRETS_BUCKET,
    },
    artifactBucket: config.CAIRN_ARTIFACT_BUCKET ?? DEFAULT_ARTIFACT_BUCKET,
    tlog: stackTlogNames(config),
    workerId: config.CAIRN_WORKER_ID ?? isolatedNames(stackId).CAIRN_WORKER_ID,
  };
}

async function writeAtomically(path: string, text: string, mode: number): Promise<void> {
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, text, { mode, flag: 'w' });
  await chmod(temporary, mode);
  await rename(temporary, path);
}

/**
 * Makes the seeds that are missing (an existing one is kept, and checked) and writes the include
 * afresh from the table, so a release that changes what a service does changes its user too.
 */
export async function writeStackNatsAuth(home: string, config: Record<string, string>, stackId: string): Promise<StackNatsAuth> {
  const dir = join(home, NATS_AUTH_DIR);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  const names = stackNatsNames(config, stackId);
  const users: NatsUser[] = [];
  const created: string[] = [];
  const files = {} as StackNatsAuth['files'];
  for (const user of [OPERATOR_USER, ...NATS_SERVICES] as const) {
    const file = natsCredsFileOf(home, user);
    const seed = await ensureNatsSeedFile(file);
    if (seed.created) created.push(user);
    files[user] = file;
    users.push({ name: user, nkey: seed.publicKey, permissions: user === OPERATOR_USER ? OPERATOR_PERMISSIONS : natsPermissionsFor(user, names) });
  }
  const include = join(dir, NATS_AUTH_INCLUDE);
  const header = [
    `Cairn stack ${stackId}: one NATS user per service (docs/adr/0022), written by \`cairn nats-auth\`.`,
    'Generated from SERVICE_ROUTES (libs/config/src/service-routes.ts); edit that, not this file.',
    `Evidence ${names.evidenceStream} (${names.evidencePrefix}.>), commands ${names.commandStream} (${names.commandPrefix}.cmd.>), worker ${names.workerId}.`,
    'Public keys only: the seeds stay in the .nk files beside it (mode 0600).',
  ].join('\n');
  await writeAtomically(include, renderAuthorization(users, header), 0o644);
  return { dir, include, files, created };
}

/**
 * Makes every stream and bucket of the stack with the operator's user (`credsFile`), as each
 * service would on first use: with this server's authorization, no service may create a stream.
 */
export async function provisionStackStreams(config: Record<string, string>, credsFile: string): Promise<void> {
  const evidence = loadConfig(EvidenceLogConfigSchema, config);
  const operational = loadConfig(OperationalConfigSchema, config);
  const nc = await connectNats({ servers: evidence.CAIRN_NATS_URL, name: 'cairn-up', maxReconnectAttempts: 0, credsFile });
  try {
    const log = await EvidenceLog.fromConnection(nc, evidenceLogOptionsFromConfig(evidence, { appends: new Set() }));
    await log.close();
    await CommandBus.open(nc, commandBusOptionsFromConfig(operational));
    const replicas = operational.CAIRN_NATS_REPLICAS;
    await WorkerRegistry.open(nc, { bucket: operational.CAIRN_WORKERS_BUCKET, replicas });
    (await WorkerDrains.open(nc, { bucket: drainsBucketFor(operational.CAIRN_WORKERS_BUCKET), replicas })).close();
    await LeaseStore.open(nc, { bucket: operational.CAIRN_LEASES_BUCKET, replicas });
    const queue = await PlacementQueue.open(nc, { bucket: operational.CAIRN_QUEUE_BUCKET ?? queueBucketFor(operational.CAIRN_LEASES_BUCKET), replicas });
    queue.close();
    await openBucket(nc, config.CAIRN_APPROVALS_BUCKET ?? approvalsBucketFor(operational.CAIRN_LEASES_BUCKET), APPROVAL_DEADLINES_LIMITS, replicas);
    // The log of seal heads, as its writer (the grader) would make it.
    (await TransparencyLog.open(nc, { ...stackTlogNames(config), replicas }, 'writer')).close();
    // The secret catalog (ADR 0028): the gateway writes it, policy and the workers read it.
    const { SecretCatalog } = await import('@cairn/secret-store');
    await SecretCatalog.open(nc, { bucket: loadConfig(SecretCatalogConfigSchema, config).CAIRN_SECRETS_BUCKET, replicas });
    const artifacts = loadConfig(ArtifactStoreConfigSchema, config);
    await NatsArtifactStore.open(nc, { bucket: artifacts.CAIRN_ARTIFACT_BUCKET, create: { replicas, maxBytes: artifacts.CAIRN_ARTIFACT_STORE_MAX_BYTES } });
  } catch (error) {
    throw error instanceof CairnError ? error : new CairnError('E_UNAVAILABLE', `cannot make the stack's streams and buckets: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    await nc.close().catch(() => undefined);
  }
}

/** `cairn nats-auth`: the stack's users as `cairn up --nats-auth` will name them, written for the server to include first. */
export async function writeNatsAuthFor(env: NodeJS.ProcessEnv): Promise<StackNatsAuth & { stackId: string }> {
  const location = stackLocation(env);
  await ensureHome(location.home);
  const config = stackServiceConfig(env, location, 0);
  config.CAIRN_WORKER_ID = await stackWorkerId(config, location.stackId);
  return { ...(await writeStackNatsAuth(location.home, config, location.stackId)), stackId: location.stackId };
}
