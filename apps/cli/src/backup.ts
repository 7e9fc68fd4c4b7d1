import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { approvalsBucketFor, DEFAULT_ARTIFACT_BUCKET, DEFAULT_EVIDENCE_STREAM, DEFAULT_SECRETS_BUCKET, drainsBucketFor, EvidenceLogConfigSchema, isolatedNames, loadConfig, queueBucketFor, TlogConfigSchema, tlogNames } from '@cairn/config';
import { CairnError } from '@cairn/contracts';
import { connectNats, restoreStream, snapshotStream } from '@cairn/evidence-log';
import type { StreamSnapshot } from '@cairn/evidence-log';
import { bucketStreamName, DEFAULT_COMMAND_STREAM, DEFAULT_LEASES_BUCKET, DEFAULT_WORKERS_BUCKET } from '@cairn/operational';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { CONNECT_TIMEOUT_MS, openEvidenceLog, unavailableError, withPostgres } from './connections.js';
import { stackLocation } from './stack/stack-config.js';
import { readStackFile } from './stack/stack-file.js';
import { isServiceAlive } from './stack/service-process.js';

/*
 * A stack's backup (docs/operations.md): a directory of the database (`pg_dump -Fc`, taken
 * first) and a snapshot of each of the stack's streams (taken after, so the log is never behind
 * what the database says of it), and a manifest with every file's sha256. No key is in it: the
 * secret key and the seal key are kept, and backed up, apart.
 */

/** The stack's names (isolated per stack id, or as `cairn up` recorded them) under what the caller set. */
export async function stackEnv(env: NodeJS.ProcessEnv): Promise<{ env: NodeJS.ProcessEnv; running: string[] }> {
  const location = stackLocation(env);
  const stack = await readStackFile(location.home);
  const merged: NodeJS.ProcessEnv = { ...(location.stackId === 'default' ? {} : isolatedNames(location.stackId)), ...(stack?.config ?? {}) };
  for (const [key, value] of Object.entries(env)) if (value !== undefined && value !== '') merged[key] = value;
  const running = Object.entries(stack?.services ?? {})
    .filter(([, record]) => record !== undefined && isServiceAlive(record.pid, record.main))
    .map(([service]) => service);
  return { env: merged, running };
}

export async function connectForBackup(env: NodeJS.ProcessEnv) {
  const url = loadConfig(EvidenceLogConfigSchema, env).CAIRN_NATS_URL;
  try {
    return await connectNats({ servers: url, name: 'cairn-cli', timeout: CONNECT_TIMEOUT_MS, maxReconnectAttempts: 0 });
  } catch (error) {
    throw unavailableError('NATS', 'CAIRN_NATS_URL', url, error);
  }
}

/** A restore goes into a stopped stack only. */
export function assertStopped(running: readonly string[]): void {
  if (running.length > 0) throw new CairnError('E_CONFLICT', `the stack is running (${running.join(', ')}): stop it with \`cairn down\` before restoring`, { running });
}

/** The migrations, then every projection rebuilt from the restored log. */
export async function rebuildAfterRestore(env: NodeJS.ProcessEnv, url: string): Promise<{ events: number; runs: number }> {
  const { migrate, rebuildProjections } = await import('@cairn/persistence');
  await withPostgres(url, () => migrate(url));
  const evidence = await openEvidenceLog(env, { mustExist: true });
  try {
    const summary = await withPostgres(url, () => rebuildProjections({ url, log: evidence.log }));
    return { events: summary.events, runs: summary.runs };
  } finally {
    await evidence.close();
  }
}

export const BACKUP_FORMAT = 'cairn.backup/v1';
export const MANIFEST_FILE = 'manifest.json';
const DATABASE_FILE = 'database.dump';

const StreamEntrySchema = z.object({
  stream: z.string().regex(/^[A-Za-z0-9_-]+$/),
  file: z.string().regex(/^streams\/[A-Za-z0-9_-]+\.snapshot$/),
  bytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  messages: z.number().int().nonnegative(),
  lastSeq: z.number().int().nonnegative(),
  config: z.record(z.string(), z.unknown()),
  state: z.record(z.string(), z.unknown()),
});

export const BackupManifestSchema = z.object({
  format: z.literal(BACKUP_FORMAT),
  createdAt: z.string(),
  stackId: z.string(),
  database: z.object({ file: z.literal(DATABASE_FILE), bytes: z.number().int().nonnegative(), sha256: z.string().regex(/^[0-9a-f]{64}$/) }),
  streams: z.array(StreamEntrySchema).min(1),
});
export type BackupManifest = z.infer<typeof BackupManifestSchema>;

function tlogStreams(env: NodeJS.ProcessEnv): { stream: string; required: boolean }[] {
  const names = tlogNames(loadConfig(EvidenceLogConfigSchema.extend(TlogConfigSchema.shape), env));
  return [{ stream: names.stream, required: false }, { stream: bucketStreamName(names.checkpointBucket), required: false }];
}

/** The streams a stack keeps: the evidence log first (it must be there), then commands, the KV buckets and the artifact store (when they are). */
export function stackStreams(env: NodeJS.ProcessEnv): { stream: string; required: boolean }[] {
  const leases = env.CAIRN_LEASES_BUCKET || DEFAULT_LEASES_BUCKET;
  return [
    { stream: env.CAIRN_EVIDENCE_STREAM || DEFAULT_EVIDENCE_STREAM, required: true },
    { stream: env.CAIRN_COMMAND_STREAM || DEFAULT_COMMAND_STREAM, required: false },
    ...[env.CAIRN_WORKERS_BUCKET || DEFAULT_WORKERS_BUCKET, drainsBucketFor(env.CAIRN_WORKERS_BUCKET || DEFAULT_WORKERS_BUCKET), leases, approvalsBucketFor(leases), queueBucketFor(leases)].map((bucket) => ({ stream: bucketStreamName(bucket), required: false })),
    // The secret catalog (ADR 0028): values sealed to the workers' public key, never a key.
    { stream: bucketStreamName(env.CAIRN_SECRETS_BUCKET || DEFAULT_SECRETS_BUCKET), required: false },
    // The log of seal heads and its checkpoints (ADR 0020): a restored deployment keeps its promises to witnesses.
    ...tlogStreams(env),
    // The outputs the receipts name by sha256 (ADR 0021): without them a restored run's outputs are gone.
    { stream: `OBJ_${env.CAIRN_ARTIFACT_BUCKET || DEFAULT_ARTIFACT_BUCKET}`, required: false },
  ];
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * Runs a PostgreSQL client tool on the database of `url`, its password in a passfile of its
 * own (mode 0600, removed after) — never in argv or the environment.
 */
async function pgTool(tool: 'pg_dump' | 'pg_restore', url: string, args: readonly string[]): Promise<void> {
  const parsed = new URL(url);
  const password = decodeURIComponent(parsed.password);
  parsed.password = '';
  const dir = await mkdtemp(join(tmpdir(), 'cairn-pgpass-'));
  const passfile = join(dir, 'pgpass');
  const field = (value: string) => value.replace(/\\/g, '\\\\').replace(/:/g, '\\:');
  await writeFile(passfile, `*:*:*:*:${field(password)}\n`, { mode: 0o600 });
  try {
    const { PGPASSWORD: _dropped, ...env } = process.env;
    const stderr: Buffer[] = [];
    const code = await new Promise<number>((resolve, reject) => {
      const child = spawn(tool, [...args, `--dbname=${parsed.toString()}`], { env: { ...env, PGPASSFILE: passfile }, stdio: ['ignore', 'ignore', 'pipe'] });
      child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
      child.on('error', (error: NodeJS.ErrnoException) =>
        reject(error.code === 'ENOENT' ? new CairnError('E_UNAVAILABLE', `${tool} is not installed (apt-get install postgresql-client)`) : error),
      );
      child.on('close', (status) => resolve(status ?? 1));
    });
    if (code !== 0) throw new CairnError('E_UNAVAILABLE', `${tool} failed (exit ${code}): ${Buffer.concat(stderr).toString('utf8').trim().slice(-500)}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export interface BackupResult {
  manifest: BackupManifest;
  skipped: string[];
}

export async function takeBackup(nc: NatsConnection, env: NodeJS.ProcessEnv, databaseUrl: string, dir: string): Promise<BackupResult> {
  const existing = await readdir(dir).catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? null : Promise.reject(error)));
  if (existing !== null && existing.length > 0) throw new CairnError('E_CONFLICT', `${dir} is not empty: a backup goes into a new or empty directory`, { path: dir });
  await mkdir(join(dir, 'streams'), { recursive: true, mode: 0o700 });
  // The database first: the log snapshot after it is then never behind what the database says of it.
  const databaseFile = join(dir, DATABASE_FILE);
  await pgTool('pg_dump', databaseUrl, ['--format=custom', '--no-owner', '--no-privileges', `--file=${databaseFile}`]);
  const database = { file: DATABASE_FILE, bytes: (await stat(databaseFile)).size, sha256: await sha256Of(databaseFile) } as const;
  const jsm = await jetstreamManager(nc);
  const streams: BackupManifest['streams'] = [];
  const skipped: string[] = [];
  for (const { stream, required } of stackStreams(env)) {
    const exists = await jsm.streams.info(stream).then(() => true, () => false);
    if (!exists) {
      if (required) throw new CairnError('E_NOT_FOUND', `the evidence stream ${stream} does not exist: nothing to back up`, { stream });
      skipped.push(stream);
      continue;
    }
    const file = `streams/${stream}.snapshot`;
    const snapshot: StreamSnapshot = await snapshotStream(nc, stream, join(dir, file));
    streams.push({
      stream,
      file,
      bytes: snapshot.bytes,
      sha256: snapshot.sha256,
      messages: snapshot.state.messages,
      lastSeq: snapshot.state.last_seq,
      config: snapshot.config,
      state: snapshot.state,
    });
  }
  const manifest: BackupManifest = { format: BACKUP_FORMAT, createdAt: new Date().toISOString(), stackId: env.CAIRN_STACK_ID || 'default', database, streams };
  await writeFile(join(dir, MANIFEST_FILE), JSON.stringify(manifest, null, 2) + '\n', { mode: 0o600 });
  return { manifest, skipped };
}

/** Reads and checks a backup's manifest and every file's digest (E_INPUT naming what is wrong). */
export async function readBackup(dir: string): Promise<BackupManifest> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(join(dir, MANIFEST_FILE), 'utf8'));
  } catch (error) {
    throw new CairnError('E_INPUT', `${join(dir, MANIFEST_FILE)} cannot be read as a backup manifest: ${error instanceof Error ? error.message : String(error)}`, { path: dir });
  }
  const parsed = BackupManifestSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new CairnError('E_INPUT', `${MANIFEST_FILE}: ${issue.path.join('.') || '(root)'}: ${issue.message}`, { field: issue.path.join('.') });
  }
  const manifest = parsed.data;
  for (const entry of [manifest.database, ...manifest.streams]) {
    const path = join(dir, entry.file);
    const digest = await sha256Of(path).catch(() => null);
    if (digest !== entry.sha256) throw new CairnError('E_INPUT', `${entry.file} is ${digest === null ? 'missing' : 'not the file the manifest recorded (sha256 differs)'}`, { path });
  }
  return manifest;
}

export interface RestoreResult {
  streams: { stream: string; messages: number }[];
}

/**
 * Restores the streams and the database of a checked backup. A stream that exists is refused
 * (E_CONFLICT) unless `replace`, which deletes it first; nothing is restored until every stream
 * has been looked at.
 */
export async function restoreBackup(nc: NatsConnection, dir: string, manifest: BackupManifest, databaseUrl: string, replace: boolean): Promise<RestoreResult> {
  const jsm = await jetstreamManager(nc);
  const present: string[] = [];
  for (const entry of manifest.streams) if (await jsm.streams.info(entry.stream).then(() => true, () => false)) present.push(entry.stream);
  if (present.length > 0 && !replace) {
    throw new CairnError('E_CONFLICT', `stream${present.length > 1 ? 's' : ''} ${present.join(', ')} exist${present.length > 1 ? '' : 's'}: restore into a NATS without them, or give --replace to delete them first`, { streams: present });
  }
  for (const stream of present) await jsm.streams.delete(stream);
  await pgTool('pg_restore', databaseUrl, ['--clean', '--if-exists', '--no-owner', '--no-privileges', '--single-transaction', join(dir, manifest.database.file)]);
  const streams: RestoreResult['streams'] = [];
  for (const entry of manifest.streams) {
    const restored = await restoreStream(nc, { stream: entry.stream, sha256: entry.sha256, config: entry.config, state: entry.state } as never, join(dir, entry.file));
    if (restored.messages !== entry.messages) throw new CairnError('E_UNAVAILABLE', `restore of ${entry.stream}: ${restored.messages} messages, the backup had ${entry.messages}`);
    streams.push({ stream: entry.stream, messages: restored.messages });
  }
  return { streams };
}
