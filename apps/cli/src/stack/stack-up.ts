import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import { DatabaseConfigSchema, isNatsService, loadConfig } from '@cairn/config';
import { CairnError, isCairnError } from '@cairn/contracts';
import type { Health } from '@cairn/contracts';
import { cairnClient } from '../cairn-client.js';
import { checkPrerequisites, canRunSetup, prerequisitesError, runSetup } from './preflight.js';
import { DEFAULT_MCP_PORT, isStackService, STACK_SERVICES, stackLocation, stackServiceConfig, StackSettingsSchema } from './stack-config.js';
import type { StackLocation, StackService } from './stack-config.js';
import { ensureHome, newApiKey, readApiKey, readStackFile, removeStackFile, withStackLock, writeApiKey, writeStackFile } from './stack-file.js';
import type { ServiceRecord, StackFile } from './stack-file.js';
import { isServiceAlive, logTail, missingBuilds, REPO_ROOT, startServiceProcess, stopProcesses } from './service-process.js';
import { natsCredsFileOf, provisionStackStreams, stackWorkerId, writeStackNatsAuth } from './nats-auth.js';
import { pgRolesDirOf, prepareStackDatabase, ROLES_DIR_VARIABLE, serviceDatabaseEnv, stackPasswordFiles } from './pg-roles.js';

export interface UpOptions {
  /** May run tools/ensure-services.sh when a prerequisite does not answer. */
  setup: boolean;
  /** How long to wait for the gateway to report every service healthy. */
  timeoutMs: number;
  progress: (message: string) => void;
  /** Where the setup script's output goes. */
  stderr: NodeJS.WritableStream;
  root?: string;
  /**
   * Per-service NATS users (docs/adr/0022): writes them under `<home>/nats/` (`cairn nats-auth`),
   * makes the streams and buckets with the operator's user and starts each service with its own.
   * The server must already include `<home>/nats/auth.conf`.
   */
  natsAuth?: boolean;
}

export interface UpResult {
  url: string;
  /** The MCP gateway's Streamable HTTP endpoint; absent for a stack started before it existed. */
  mcpUrl?: string;
  apiKey: string;
  keyFile: string;
  home: string;
  stackId: string;
  /** `started`: a new stack; `running`: it was already up; `restarted`: missing services were started again. */
  outcome: 'started' | 'running' | 'restarted';
  restarted: StackService[];
  services: Partial<Record<StackService, number>>;
  logDir: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A loopback port free right now (bound, then released), for CAIRN_GATEWAY_PORT=0. */
export async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new CairnError('E_INTERNAL', 'no free loopback port');
  return address.port;
}

/** The services that open secret values (ADR 0028): only they learn where the private key file is. */
const SECRET_OPENERS: readonly string[] = ['runtime', 'kernel', 'verifier', 'grader'];

/**
 * The environment a service process gets: the caller's, minus every CAIRN_* setting, plus the
 * stack's — but the path of the secrets private key file only for the services that open values
 * (never the gateway, which seals to the public key: ADR 0028).
 */
export function serviceEnv(base: NodeJS.ProcessEnv, config: Record<string, string>, extra: Record<string, string> = {}, service?: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  // OTEL_SERVICE_NAME would give every process one name: each names itself (cairn-<service>, ADR 0031).
  for (const [key, value] of Object.entries(base)) if (!key.startsWith('CAIRN_') && key !== 'OTEL_SERVICE_NAME' && value !== undefined) env[key] = value;
  const stackConfig = { ...config };
  if (service !== undefined && !SECRET_OPENERS.includes(service)) delete stackConfig.CAIRN_SECRETS_PRIVATE_KEY_FILE;
  // PostgreSQL roles per service (ADR 0032): the stack's (admin) URL reaches no service, each one its own role's.
  const database = service === undefined ? null : serviceDatabaseEnv(config, service);
  if (database !== null) {
    for (const key of ['CAIRN_DATABASE_URL', 'CAIRN_DATABASE_PASSWORD_FILE', ROLES_DIR_VARIABLE]) delete stackConfig[key];
    Object.assign(stackConfig, database);
  }
  return { ...env, ...stackConfig, ...extra };
}

function liveServices(stack: StackFile): { alive: StackService[]; missing: StackService[] } {
  const alive: StackService[] = [];
  const missing: StackService[] = [];
  for (const service of STACK_SERVICES) {
    const record = stack.services[service];
    if (record !== undefined && isServiceAlive(record.pid, record.main)) alive.push(service);
    else missing.push(service);
  }
  return { alive, missing };
}

function pids(stack: StackFile): Partial<Record<StackService, number>> {
  const out: Partial<Record<StackService, number>> = {};
  for (const [name, record] of Object.entries(stack.services)) if (isStackService(name)) out[name] = record.pid;
  return out;
}

function describeHealth(health: Health | null): string {
  if (health === null) return 'the gateway does not answer yet';
  const services = Object.entries(health.checks.services ?? {})
    .filter(([, state]) => state !== 'ok')
    .map(([name, state]) => `${name} ${state}`);
  const checks = (['nats', 'postgres'] as const).filter((name) => health.checks[name] !== 'ok').map((name) => `${name} ${health.checks[name]}`);
  return [...checks, ...services].join(', ') || health.status;
}

/**
 * Waits until the gateway reports every check ok, while watching that each process of the stack
 * stays up; a process that dies is reported with the tail of its log.
 */
async function waitHealthy(stack: StackFile, apiKey: string, timeoutMs: number, progress: (message: string) => void): Promise<void> {
  const client = cairnClient(stack.url, apiKey);
  const deadline = Date.now() + timeoutMs;
  let last: Health | null = null;
  let reported = '';
  for (;;) {
    for (const service of STACK_SERVICES) {
      const record = stack.services[service];
      if (record !== undefined && !isServiceAlive(record.pid, record.main)) {
        const tail = await logTail(record.log);
        throw new CairnError('E_UNAVAILABLE', `${service} exited while the stack was starting (log ${record.log}):\n${tail}`, { service, log: record.log });
      }
    }
    try {
      last = await client.operator.health();
      if (last.status === 'ok' && (await mcpAnswers(stack))) return;
    } catch (error) {
      if (!isCairnError(error) || (error.code !== 'E_UNAVAILABLE' && error.code !== 'E_INTERNAL')) throw error;
      last = null;
    }
    const state = describeHealth(last);
    if (state !== reported) {
      progress(`waiting for the stack: ${state}`);
      reported = state;
    }
    if (Date.now() > deadline) {
      throw new CairnError('E_UNAVAILABLE', `the stack did not become healthy within ${Math.round(timeoutMs / 1000)} s (${state}); see the logs in ${stack.home}/logs`, {
        health: last,
      });
    }
    await sleep(250);
  }
}

/** Whether the stack's MCP endpoint answers its health check (true for a stack without one). */
async function mcpAnswers(stack: StackFile): Promise<boolean> {
  if (stack.mcpUrl === undefined) return true;
  try {
    const response = await fetch(new URL('/health', stack.mcpUrl), { signal: AbortSignal.timeout(5_000) });
    await response.body?.cancel();
    return response.ok;
  } catch {
    return false;
  }
}

/** The MCP gateway's port: the one in the stack's configuration, else one chosen now (and recorded). */
async function ensureMcpPort(stack: StackFile, env: NodeJS.ProcessEnv): Promise<void> {
  const given = stack.config.CAIRN_MCP_PORT;
  if (given === undefined || given === '0') {
    const settings = loadConfig(StackSettingsSchema, env);
    const wanted = given === '0' ? 0 : (settings.CAIRN_MCP_PORT ?? (settings.CAIRN_GATEWAY_PORT === 0 ? 0 : DEFAULT_MCP_PORT));
    stack.config.CAIRN_MCP_PORT = String(wanted === 0 ? await freeLoopbackPort() : wanted);
  }
  stack.mcpUrl = `http://127.0.0.1:${stack.config.CAIRN_MCP_PORT}/mcp`;
}

/**
 * A stack with per-service NATS users gives each service its own credentials file, never the
 * operator's the stack's configuration names (the MCP gateway, which has no NATS connection, none).
 */
function serviceCredentials(stack: StackFile, service: StackService): Record<string, string> {
  if (stack.config.CAIRN_NATS_CREDS_DIR === undefined) return {};
  return { CAIRN_NATS_CREDS_FILE: isNatsService(service) ? natsCredsFileOf(stack.home, service) : '' };
}

async function startServices(
  services: readonly StackService[],
  stack: StackFile,
  apiKey: string,
  baseEnv: NodeJS.ProcessEnv,
  root: string,
  progress: (message: string) => void,
): Promise<void> {
  if (services.includes('mcp-gateway')) await ensureMcpPort(stack, baseEnv);
  for (const service of services) {
    // Only the gateway learns the key, and only to register it at start. The MCP gateway learns
    // where the REST gateway is; each MCP client brings its own key.
    const extra: Record<string, string> = {
      ...(service === 'gateway' ? { CAIRN_API_KEY: apiKey } : service === 'mcp-gateway' ? { CAIRN_MCP_UPSTREAM_URL: stack.url } : {}),
      ...serviceCredentials(stack, service),
    };
    const record: ServiceRecord = await startServiceProcess({ service, home: stack.home, env: serviceEnv(baseEnv, stack.config, extra, service), root });
    stack.services[service] = record;
    progress(`started ${service} (pid ${record.pid})`);
  }
  await writeStackFile(stack.home, stack);
}

async function resolveApiKey(env: NodeJS.ProcessEnv, location: StackLocation): Promise<string> {
  const given = env.CAIRN_API_KEY;
  if (given !== undefined && given !== '') {
    await writeApiKey(location.home, given);
    return given;
  }
  const stored = await readApiKey(location.home);
  if (stored !== null) return stored;
  const minted = newApiKey();
  await writeApiKey(location.home, minted);
  return minted;
}

async function ensurePrerequisites(config: Record<string, string>, options: UpOptions, env: NodeJS.ProcessEnv, root: string): Promise<void> {
  let problems = await checkPrerequisites(config);
  if (problems.length === 0) return;
  for (const problem of problems) options.progress(problem.message);
  if (!options.setup || !canRunSetup(root)) throw prerequisitesError(problems, false);
  options.progress('running tools/ensure-services.sh…');
  const code = await runSetup(root, options.stderr, serviceEnv(env, {}));
  problems = await checkPrerequisites(config);
  if (problems.length > 0 || code !== 0) throw prerequisitesError(problems.length > 0 ? problems : [{ what: 'docker', message: `tools/ensure-services.sh exited ${code}` }], true);
}

async function startFresh(env: NodeJS.ProcessEnv, location: StackLocation, options: UpOptions, root: string): Promise<UpResult> {
  const unbuilt = missingBuilds(STACK_SERVICES, root);
  if (unbuilt.length > 0) {
    throw new CairnError('E_UNAVAILABLE', `not built: ${unbuilt.map((s) => `apps/${s}/dist/main.js`).join(', ')}; run \`npm run build\` first`, { unbuilt });
  }
  const settings = loadConfig(StackSettingsSchema, env);
  const port = settings.CAIRN_GATEWAY_PORT === 0 ? await freeLoopbackPort() : settings.CAIRN_GATEWAY_PORT;
  const config = stackServiceConfig(env, location, port);
  if (options.natsAuth === true) {
    // The runtime's user is its worker's: the id is fixed before the permissions name it.
    config.CAIRN_WORKER_ID = await stackWorkerId(config, location.stackId);
    const auth = await writeStackNatsAuth(location.home, config, location.stackId);
    config.CAIRN_NATS_CREDS_DIR = auth.dir;
    config.CAIRN_NATS_CREDS_FILE = auth.files.operator;
    options.progress(`NATS users of this stack: ${auth.include}${auth.created.length > 0 ? ` (new: ${auth.created.join(', ')})` : ''}`);
  }

  try {
    await ensurePrerequisites(config, options, env, root);
  } catch (error) {
    if (options.natsAuth !== true || !isCairnError(error) || !error.message.includes('refused')) throw error;
    const include = `${config.CAIRN_NATS_CREDS_DIR}/auth.conf`;
    throw new CairnError('E_UNAVAILABLE', `${error.message}; the NATS server must load ${include} (\`include\` it in the server's configuration, then \`nats-server --signal reload\`)`, { ...error.details, include });
  }
  if (options.natsAuth === true) {
    await provisionStackStreams(config, config.CAIRN_NATS_CREDS_FILE!);
    options.progress('streams and buckets made with the operator user');
  }

  // Loaded on use: dockerode and TypeORM are not needed by the other commands.
  const { ensureBusyboxImage, BUSYBOX_IMAGE_TAG, createDockerClient } = await import('@cairn/sandbox-docker');
  options.progress(`sandbox image ${BUSYBOX_IMAGE_TAG}…`);
  const imageId = await ensureBusyboxImage({ docker: createDockerClient(config.CAIRN_DOCKER_SOCKET) });
  options.progress(`sandbox image ${BUSYBOX_IMAGE_TAG} ${imageId.slice(0, 19)}`);

  // Every key file first: one that others may read stops the up before PostgreSQL is touched, so a
  // refused up changes no role of a database another stack may be using (ADR 0032).
  const apiKey = await resolveApiKey(env, location);
  // The secret store's key: made (mode 0600) when absent; one that others may read stops the stack here.
  const { ensureSecretKeyFile } = await import('@cairn/secret-store');
  const secretsKeyFile = config.CAIRN_SECRETS_KEY_FILE ?? `${location.home}/secrets.key`;
  const { created } = await ensureSecretKeyFile(secretsKeyFile);
  options.progress(created ? `secret key file created: ${secretsKeyFile}` : `secret key file ${secretsKeyFile}`);
  // The secrets keypair (ADR 0028): made (private mode 0600) when absent, its public half written beside it.
  const { ensureBoxKeyFiles } = await import('@cairn/secret-store');
  const box = await ensureBoxKeyFiles(config.CAIRN_SECRETS_PRIVATE_KEY_FILE ?? `${location.home}/secrets-box.key`, config.CAIRN_SECRETS_PUBLIC_KEY_FILE ?? `${location.home}/secrets-box.pub`);
  options.progress(box.created ? `secrets keypair created: key id ${box.keyId}` : `secrets keypair ${box.keyId}`);
  // The seal signing key: made (mode 0600) when absent, its public key listed first in the public keys file.
  const { ensureSealKeyFile } = await import('@cairn/secret-store');
  const sealKeyFile = config.CAIRN_SEAL_KEY_FILE ?? `${location.home}/seal.key`;
  const seal = await ensureSealKeyFile(sealKeyFile, config.CAIRN_SEAL_PUBLIC_KEYS_FILE ?? `${location.home}/seal-keys.pub`, `cairn/${location.stackId}`);
  options.progress(seal.created ? `seal key created: ${seal.verifierKey}` : `seal key ${seal.verifierKey}`);

  const { withPostgres } = await import('../connections.js');
  const databaseUrl = loadConfig(DatabaseConfigSchema, config).CAIRN_DATABASE_URL;
  // Each service's role (ADR 0032): made or brought back to PG_TABLES, the existing tables handed to
  // their owners, the shared migration sets run as their owners, and what they made granted.
  await mkdir(pgRolesDirOf(location.home), { recursive: true, mode: 0o700 });
  const prepared = await withPostgres(databaseUrl, () => prepareStackDatabase(databaseUrl, stackPasswordFiles(location.home)), 60_000);
  options.progress(`PostgreSQL roles: ${Object.values(prepared.roles.services).map((s) => s.role).join(', ')}${prepared.roles.created.length > 0 ? ` (new passwords: ${prepared.roles.created.join(', ')})` : ''}`);
  if (prepared.transferred.length > 0) options.progress(`tables handed to their services' roles: ${prepared.transferred.join(', ')}`);
  options.progress(prepared.applied.length === 0 ? 'database schema up to date' : `migrations applied: ${prepared.applied.join(', ')}`);
  if (prepared.unknown.length > 0) options.progress(`tables no service's grants name (left as they are): ${prepared.unknown.join(', ')}`);
  config[ROLES_DIR_VARIABLE] = pgRolesDirOf(location.home);
  const stack: StackFile = {
    version: 1,
    stackId: location.stackId,
    url: `http://127.0.0.1:${port}`,
    home: location.home,
    keyFile: `${location.home}/api-key`,
    startedAt: new Date().toISOString(),
    config,
    services: {},
  };
  try {
    await startServices(STACK_SERVICES, stack, apiKey, env, root, options.progress);
    await waitHealthy(stack, apiKey, options.timeoutMs, options.progress);
  } catch (error) {
    // Fail closed: nothing of a stack that did not come up is left running.
    await stopProcesses(Object.values(stack.services), 5_000);
    await removeStackFile(location.home);
    throw error;
  }
  return result(stack, apiKey, 'started', []);
}

function result(stack: StackFile, apiKey: string, outcome: UpResult['outcome'], restarted: StackService[]): UpResult {
  return {
    url: stack.url,
    ...(stack.mcpUrl === undefined ? {} : { mcpUrl: stack.mcpUrl }),
    apiKey,
    keyFile: stack.keyFile,
    home: stack.home,
    stackId: stack.stackId,
    outcome,
    restarted,
    services: pids(stack),
    logDir: `${stack.home}/logs`,
  };
}

/**
 * `cairn up`: starts the stack in the background and returns once it is healthy. On a stack
 * that is already up it changes nothing; services of it that are gone (crashed, killed) are
 * started again with the configuration the stack was started with.
 */
export async function stackUp(env: NodeJS.ProcessEnv, options: UpOptions): Promise<UpResult> {
  const location = stackLocation(env);
  const root = options.root ?? REPO_ROOT;
  await ensureHome(location.home);
  return withStackLock(location.home, (pid) => isServiceAlive(pid), async () => {
    const existing = await readStackFile(location.home);
    if (existing === null) return startFresh(env, location, options, root);

    const apiKey = (await readApiKey(location.home)) ?? (await resolveApiKey(env, location));
    const { alive, missing } = liveServices(existing);
    if (alive.length === 0) {
      // Nothing of it runs any more (a reboot, a kill): start it anew.
      options.progress(`the stack in ${location.home} is not running; starting it again`);
      await removeStackFile(location.home);
      return startFresh(env, location, options, root);
    }
    if (missing.length > 0) {
      options.progress(`restarting ${missing.join(', ')}`);
      await startServices(missing, existing, apiKey, env, root, options.progress);
    }
    await waitHealthy(existing, apiKey, options.timeoutMs, options.progress);
    return result(existing, apiKey, missing.length > 0 ? 'restarted' : 'running', missing);
  });
}

/**
 * Stops `services` of a running stack (SIGTERM, then SIGKILL after `timeoutMs`) and starts them
 * again with the configuration the stack was started with — after a key file they read at boot
 * changed. Null when no stack runs (nothing to restart).
 */
export async function stackRestart(env: NodeJS.ProcessEnv, services: readonly StackService[], options: UpOptions): Promise<UpResult | null> {
  const location = stackLocation(env);
  const root = options.root ?? REPO_ROOT;
  const existing = await readStackFile(location.home);
  if (existing === null) return null;
  return withStackLock(location.home, (pid) => isServiceAlive(pid), async () => {
    const apiKey = (await readApiKey(location.home)) ?? (await resolveApiKey(env, location));
    const records = services.map((service) => existing.services[service]).filter((record): record is ServiceRecord => record !== undefined);
    await stopProcesses(records, 15_000);
    options.progress(`restarting ${services.join(', ')}`);
    await startServices(services, existing, apiKey, env, root, options.progress);
    await waitHealthy(existing, apiKey, options.timeoutMs, options.progress);
    return result(existing, apiKey, 'restarted', [...services]);
  });
}

export interface DownResult {
  home: string;
  stopped: { service: StackService; pid: number; signal: 'SIGTERM' | 'SIGKILL' }[];
  wasRunning: boolean;
}

/** `cairn down`: SIGTERM to every process of the stack, SIGKILL after `timeoutMs`, then the stack file goes. */
export async function stackDown(env: NodeJS.ProcessEnv, timeoutMs: number): Promise<DownResult> {
  const location = stackLocation(env);
  const stack = await readStackFile(location.home);
  if (stack === null) return { home: location.home, stopped: [], wasRunning: false };
  return withStackLock(location.home, (pid) => isServiceAlive(pid), async () => {
    const entries = Object.entries(stack.services).filter((entry): entry is [StackService, ServiceRecord] => isStackService(entry[0]));
    const outcome = await stopProcesses(
      entries.map(([, record]) => record),
      timeoutMs,
    );
    const stopped: DownResult['stopped'] = [];
    for (const [service, record] of entries) {
      if (outcome.killed.includes(record.pid)) stopped.push({ service, pid: record.pid, signal: 'SIGKILL' });
      else if (outcome.terminated.includes(record.pid)) stopped.push({ service, pid: record.pid, signal: 'SIGTERM' });
    }
    await removeStackFile(location.home);
    return { home: location.home, stopped, wasRunning: true };
  });
}
