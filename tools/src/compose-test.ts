import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDockerClient, listStackImages } from '@cairn/sandbox-docker';
import { uniqueName } from '@cairn/testing';

/*
 * `npm run test:compose` (after tools/ensure-compose.sh): the compose stack end to end, as an operator
 * would run it. Builds the stack images (`cairn images build --stack`), brings docker-compose.yml up
 * under a project name of its own (its keys, agent directory and ports its own too), runs the quick
 * start's mission through the CLI against the compose gateway to its seal, verifies the chain, asks the
 * MCP gateway and the dashboard, and tears everything down: containers, networks, volumes, the key and
 * agent directories, any sandbox its worker left, and the images it built fresh (those it found stay).
 * `--cluster` adds deploy/compose/cluster.yml: three NATS nodes at three replicas and two workers.
 * Prints each phase's duration. Exit 0 when the run sealed and verified and nothing was left behind.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'apps/cli/bin/cairn.js');
const SPEC = join(ROOT, 'examples/quickstart.yaml');

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

class ComposeTestError extends Error {}

function log(message: string): void {
  process.stderr.write(`[test:compose] ${message}\n`);
}

function exec(command: string, args: readonly string[], env: NodeJS.ProcessEnv, echo = true): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
      if (echo) process.stderr.write(chunk);
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function cairn(args: readonly string[], env: NodeJS.ProcessEnv): Promise<Result> {
  return exec(process.execPath, [CLI, ...args], env);
}

function json<T>(what: string, result: Result): T {
  try {
    return JSON.parse(result.stdout) as T;
  } catch {
    throw new ComposeTestError(`${what} exited ${String(result.code)} without a JSON result`);
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new ComposeTestError('no free port');
  return address.port;
}

async function timed<T>(phases: Record<string, number>, name: string, work: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await work();
  } finally {
    phases[name] = Math.round(performance.now() - started);
  }
}

async function main(argv: readonly string[]): Promise<number> {
  const cluster = argv.includes('--cluster');
  const phases: Record<string, number> = {};
  const project = uniqueName('cairn-compose').toLowerCase().replace(/[^a-z0-9_-]/g, '-');
  const scratch = await mkdtemp(join(tmpdir(), `${project}-`));
  const agentDir = `/run/${project}-agent`;
  const [gatewayPort, mcpPort] = [await freePort(), await freePort()];
  const files = ['-f', 'docker-compose.yml', ...(cluster ? ['-f', 'deploy/compose/cluster.yml'] : [])];
  const env: NodeJS.ProcessEnv = {
    ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('CAIRN_'))),
    CAIRN_COMPOSE_KEYS: join(scratch, 'keys'),
    CAIRN_AGENT_DIR: agentDir,
    CAIRN_GATEWAY_PORT: String(gatewayPort),
    CAIRN_MCP_PORT: String(mcpPort),
    CAIRN_HOME: join(scratch, 'home'),
    ...(process.env.CAIRN_TOOLS_DIR === undefined ? {} : { CAIRN_TOOLS_DIR: process.env.CAIRN_TOOLS_DIR }),
  };
  const compose = (args: readonly string[], echo = true) => exec('docker-compose', ['-p', project, ...files, ...args], env, echo);
  const docker = createDockerClient();
  const before = new Set((await listStackImages(docker)).map((i) => i.id));
  const sandboxBefore = await docker
    .getImage('cairn/sandbox-busybox:1')
    .inspect()
    .then(() => true, () => false);
  const workers: string[] = [];
  let ok = false;
  try {
    log(`building the stack images: cairn images build --stack`);
    const built = await timed(phases, 'images', () => cairn(['images', 'build', '--stack', '--json'], env));
    const images = json<{ ok: boolean; images?: { tag: string; cached: boolean; durationMs: number }[]; error?: { message: string } }>('cairn images build --stack', built);
    if (!images.ok) throw new ComposeTestError(`cairn images build --stack: ${images.error?.message ?? 'failed'}`);
    for (const image of images.images ?? []) log(`  ${image.tag}  ${image.cached ? 'cached' : `built in ${(image.durationMs / 1000).toFixed(1)} s`}`);

    log(`docker-compose -p ${project} ${files.join(' ')} up -d`);
    const up = await timed(phases, 'up', () => compose(['up', '-d']));
    if (up.code !== 0) throw new ComposeTestError(`docker-compose up exited ${String(up.code)}`);

    const client: NodeJS.ProcessEnv = { ...env, CAIRN_URL: `http://127.0.0.1:${gatewayPort}`, CAIRN_API_KEY_FILE: join(scratch, 'keys/gateway/api-key') };
    log(`cairn run examples/quickstart.yaml --wait (against http://127.0.0.1:${gatewayPort})`);
    const outcome = await timed(phases, 'run', async () =>
      json<{ runId?: string; state?: string; verdict?: string | null; score?: number | null; maxScore?: number | null; errorCode?: string | null; error?: { message: string } }>(
        'cairn run',
        await cairn(['run', SPEC, '--wait', '--json'], client),
      ),
    );
    if (outcome.runId === undefined) throw new ComposeTestError(`cairn run: ${outcome.error?.message ?? 'failed'}`);
    log(`${outcome.runId}: ${outcome.state ?? '?'}  verdict ${outcome.verdict ?? '-'}  grade ${outcome.score ?? '-'}/${outcome.maxScore ?? '-'}`);
    if (outcome.state !== 'SEALED') throw new ComposeTestError(`the run ended ${outcome.state ?? '?'} ${outcome.errorCode ?? ''}, not SEALED`);

    const verified = await timed(phases, 'verify', () => cairn(['verify', outcome.runId!, '-o', join(scratch, 'bundle.json')], client));
    if (verified.code !== 0) throw new ComposeTestError(`cairn verify ${outcome.runId} exited ${String(verified.code)}`);
    log(`verified: ${verified.stdout.trim().split('\n')[0] ?? ''}`);

    const mcp = await fetch(`http://127.0.0.1:${mcpPort}/health`);
    const dashboard = await fetch(`http://127.0.0.1:${gatewayPort}/dashboard/`);
    if (!mcp.ok || !dashboard.ok) throw new ComposeTestError(`the MCP gateway answered ${mcp.status}, the dashboard ${dashboard.status}`);
    log('the MCP gateway and the dashboard answer');
    ok = true;
  } catch (error) {
    log(`FAILED: ${error instanceof Error ? error.message : String(error)}`);
    const ps = await compose(['ps'], false);
    process.stderr.write(ps.stdout);
    const logs = await compose(['logs', '--no-color', '--tail', '30'], false);
    process.stderr.write(logs.stdout.slice(-20_000));
  } finally {
    for (const service of cluster ? ['runtime', 'runtime-2'] : ['runtime']) {
      const id = await compose(['exec', '-T', service, 'cat', '/var/lib/cairn/worker/worker-id'], false);
      if (id.code === 0 && id.stdout.trim() !== '') workers.push(id.stdout.trim());
    }
    log('tearing down: docker-compose down -v');
    const down = await timed(phases, 'down', () => compose(['down', '-v', '--remove-orphans', '--timeout', '20']));
    if (down.code !== 0) ok = false;
    // Whatever a worker left (a sandbox the engine was still removing when it stopped).
    for (const worker of workers) {
      for (const container of await docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${worker}`] } })) {
        log(`removing ${container.Names[0] ?? container.Id}, left by worker ${worker}`);
        await docker.getContainer(container.Id).remove({ force: true, v: true });
      }
    }
    const leftovers = await docker.listContainers({ all: true, filters: { label: [`com.docker.compose.project=${project}`] } });
    const networks = await docker.listNetworks({ filters: { label: [`com.docker.compose.project=${project}`] } });
    const volumes = (await docker.listVolumes({ filters: { label: [`com.docker.compose.project=${project}`] } })).Volumes ?? [];
    if (leftovers.length + networks.length + volumes.length > 0) {
      log(`left behind: ${leftovers.length} containers, ${networks.length} networks, ${volumes.length} volumes`);
      ok = false;
    }
    for (const image of await listStackImages(docker)) {
      if (before.has(image.id)) continue;
      await docker
        .getImage(image.id)
        .remove({ force: true })
        .catch((error: unknown) => log(`cannot remove ${image.tags[0] ?? image.id}: ${String(error)}`));
    }
    if (!sandboxBefore) await docker.getImage('cairn/sandbox-busybox:1').remove({ force: true }).catch(() => undefined);
    await rm(scratch, { recursive: true, force: true });
    await rm(agentDir, { recursive: true, force: true });
  }
  const total = Object.values(phases).reduce((a, b) => a + b, 0);
  log(`phases (s): ${Object.entries(phases).map(([name, ms]) => `${name} ${(ms / 1000).toFixed(1)}`).join(', ')}; total ${(total / 1000).toFixed(1)}`);
  log(ok ? 'OK: the compose stack sealed and verified the quick start, and left nothing behind' : 'FAILED');
  return ok ? 0 : 1;
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
