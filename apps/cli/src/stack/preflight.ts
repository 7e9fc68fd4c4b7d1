import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseConfigSchema, EvidenceLogConfigSchema, loadConfig, redactUrl } from '@cairn/config';
import { CairnError, isCairnError } from '@cairn/contracts';
import { connectNats } from '@cairn/evidence-log';
import pg from 'pg';
import { withTimeout } from '../connections.js';

/** What `cairn up` needs answering before it starts anything. */
export type Prerequisite = 'docker' | 'nats' | 'postgres';

export interface PrerequisiteProblem {
  what: Prerequisite;
  /** For people: where it was looked for, and what answered. */
  message: string;
}

const CHECK_TIMEOUT_MS = 5_000;
/** Where dockerode looks unless CAIRN_DOCKER_SOCKET says otherwise (as the runtime does). */
const DEFAULT_DOCKER_SOCKET = '/var/run/docker.sock';

function causeOf(error: unknown): string {
  if (error instanceof Error) {
    const code = 'code' in error && typeof error.code === 'string' && !error.message.includes(error.code) ? `${error.code}: ` : '';
    return `${code}${error.message}`;
  }
  return String(error);
}

async function checkDocker(socket: string): Promise<PrerequisiteProblem | null> {
  const { createDockerClient } = await import('@cairn/sandbox-docker');
  try {
    await withTimeout(createDockerClient(socket).ping(), CHECK_TIMEOUT_MS, () => new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`));
    return null;
  } catch (error) {
    return { what: 'docker', message: `the Docker engine does not answer on ${socket} (CAIRN_DOCKER_SOCKET): ${causeOf(error)}` };
  }
}

async function checkNats(url: string, replicas: number, credsFile: string | undefined): Promise<PrerequisiteProblem | null> {
  try {
    const nc = await connectNats({ servers: url, name: 'cairn-up', timeout: CHECK_TIMEOUT_MS, maxReconnectAttempts: 0, ...(credsFile === undefined ? {} : { credsFile }) });
    // A server outside a cluster refuses every stream of more than one replica: say so before anything starts.
    const cluster = nc.info?.cluster;
    await nc.close();
    if (replicas > 1 && (cluster === undefined || cluster === '')) {
      return {
        what: 'nats',
        message: `CAIRN_NATS_REPLICAS is ${replicas}, but the NATS server at ${redactUrl(url)} (CAIRN_NATS_URL) is not part of a cluster: start a cluster of at least ${replicas} nodes (deploy/nats/cluster/) or set CAIRN_NATS_REPLICAS=1`,
      };
    }
    return null;
  } catch (error) {
    if (isCairnError(error) && error.details?.['minimum'] !== undefined) return { what: 'nats', message: `${error.message} (CAIRN_NATS_URL ${redactUrl(url)})` };
    // Refused credentials, or a file that holds none, in their own words.
    if (isCairnError(error) && (error.code === 'E_UNAUTHORIZED' || error.code === 'E_INPUT')) return { what: 'nats', message: error.message };
    return { what: 'nats', message: `NATS does not answer at ${redactUrl(url)} (CAIRN_NATS_URL): ${causeOf(error)}` };
  }
}

async function checkPostgres(url: string): Promise<PrerequisiteProblem | null> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: CHECK_TIMEOUT_MS });
  try {
    await client.connect();
    await client.query('select 1');
    return null;
  } catch (error) {
    return { what: 'postgres', message: `PostgreSQL does not answer at ${redactUrl(url)} (CAIRN_DATABASE_URL): ${causeOf(error)}` };
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Checks the Docker engine, NATS and PostgreSQL the stack is configured for, all at once. */
export async function checkPrerequisites(config: Record<string, string>): Promise<PrerequisiteProblem[]> {
  const nats = loadConfig(EvidenceLogConfigSchema, config);
  const database = loadConfig(DatabaseConfigSchema, config).CAIRN_DATABASE_URL;
  const socket = config.CAIRN_DOCKER_SOCKET ?? DEFAULT_DOCKER_SOCKET;
  const problems = await Promise.all([checkDocker(socket), checkNats(nats.CAIRN_NATS_URL, nats.CAIRN_NATS_REPLICAS, nats.CAIRN_NATS_CREDS_FILE), checkPostgres(database)]);
  return problems.filter((p): p is PrerequisiteProblem => p !== null);
}

export const ENSURE_SERVICES_SCRIPT = join('tools', 'ensure-services.sh');

/** Whether this process may run the setup script: it exists here, and we are root (it installs packages). */
export function canRunSetup(root: string): boolean {
  return existsSync(join(root, ENSURE_SERVICES_SCRIPT)) && process.getuid?.() === 0;
}

/** Runs `tools/ensure-services.sh`, its output relayed to `stderr`; resolves with its exit code. */
export function runSetup(root: string, stderr: NodeJS.WritableStream, env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [join(root, ENSURE_SERVICES_SCRIPT)], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (chunk: Buffer) => stderr.write(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.write(chunk));
    child.once('error', reject);
    child.once('close', (code) => resolve(code ?? 1));
  });
}

/** E_UNAVAILABLE naming everything that does not answer, and how to fix it. */
export function prerequisitesError(problems: readonly PrerequisiteProblem[], setupTried: boolean): CairnError {
  const hint = setupTried
    ? 'tools/ensure-services.sh ran but did not bring them up: see its output above'
    : 'run `bash tools/ensure-services.sh` as root (it installs and starts NATS, PostgreSQL and Docker), or point the variables at running servers';
  return new CairnError('E_UNAVAILABLE', `cannot start the stack: ${problems.map((p) => p.message).join('; ')}; ${hint}`, {
    missing: problems.map((p) => p.what),
  });
}
