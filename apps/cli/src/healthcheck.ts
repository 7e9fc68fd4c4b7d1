import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';

/*
 * A container's healthcheck (docker-compose.yml, deploy/k8s), kept apart from the CLI so that it
 * starts in a fraction of its time:
 *
 *   node apps/cli/dist/healthcheck.js consumer <service>   its durable consumer has a pull waiting
 *   node apps/cli/dist/healthcheck.js http <url>           answers 2xx, and `status: ok` when it says a status
 *
 * A service is up when a consumer of its name pulls — what the gateway's /v1/health asks. The runtime's
 * consumer must be its own worker's (`cairn-runtime-<id>`, the id from CAIRN_WORKER_STATE_DIR/worker-id), so
 * a second worker's pull does not make this one healthy. Exit 0 healthy, 1 not (the reason on stderr).
 */

const TIMEOUT_MS = 4_000;

/** The consumer names that count for `service`: its own worker's for the runtime, else `cairn-<service>` and `cairn-<service>-…` (intake has one per verb). */
function consumerMatcher(service: string, env: NodeJS.ProcessEnv): (name: string) => boolean {
  if (service !== 'runtime') return (name) => name === `cairn-${service}` || name.startsWith(`cairn-${service}-`);
  const dir = env.CAIRN_WORKER_STATE_DIR;
  if (dir === undefined) throw new Error('CAIRN_WORKER_STATE_DIR is not set: the runtime keeps its worker id there');
  const own = `cairn-runtime-${readFileSync(join(dir, 'worker-id'), 'utf8').trim()}`;
  return (name) => name === own;
}

async function consumerPulling(service: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  if (!/^[a-z][a-z-]{1,30}$/.test(service)) return `not a service name: ${service}`;
  const matches = consumerMatcher(service, env);
  // The bare client, not connectNats: a check every few seconds per container must start fast (no contracts loaded).
  const nc = await connect({ servers: (env.CAIRN_NATS_URL ?? 'nats://127.0.0.1:4222').split(','), name: 'cairn-healthcheck', timeout: TIMEOUT_MS, maxReconnectAttempts: 0 });
  try {
    const jsm = await jetstreamManager(nc);
    let seen = 0;
    for (const stream of [env.CAIRN_EVIDENCE_STREAM ?? 'CAIRN_EVIDENCE', env.CAIRN_COMMAND_STREAM ?? 'CAIRN_COMMANDS']) {
      const consumers = await jsm.consumers
        .list(stream)
        .next()
        .catch(() => []);
      for (const info of consumers.filter((c) => matches(c.name))) {
        seen += 1;
        if (info.num_waiting > 0) return null;
      }
    }
    return seen === 0 ? `no consumer of ${service}` : `no consumer of ${service} has a pull waiting`;
  } finally {
    await nc.close();
  }
}

async function httpOk(url: string): Promise<string | null> {
  if (!/^http:\/\/[^\s]+$/.test(url)) return `not an http:// URL: ${url}`;
  const response = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) });
  const text = await response.text();
  if (!response.ok) return `${url} answered ${response.status}`;
  let status: unknown;
  try {
    status = (JSON.parse(text) as { status?: unknown }).status;
  } catch {
    return null;
  }
  return status === undefined || status === 'ok' ? null : `${url} says ${JSON.stringify(status)}: ${text.slice(0, 300)}`;
}

async function main(argv: readonly string[]): Promise<number> {
  const [kind, target] = argv;
  if (target === undefined || (kind !== 'consumer' && kind !== 'http')) {
    process.stderr.write('usage: healthcheck.js consumer <service> | http <url>\n');
    return 2;
  }
  try {
    const problem = kind === 'consumer' ? await consumerPulling(target, process.env) : await httpOk(target);
    if (problem === null) return 0;
    process.stderr.write(`unhealthy: ${problem}\n`);
  } catch (error) {
    process.stderr.write(`unhealthy: ${error instanceof Error ? error.message : String(error)}\n`);
  }
  return 1;
}

process.exitCode = await main(process.argv.slice(2));
