import { fileURLToPath } from 'node:url';
import { isNatsService, natsInboxPrefix } from '@cairn/config';
import { EVENT_TYPES, isCairnError } from '@cairn/contracts';
import { connectNats, natsAuthenticatorFromFile, natsPublicKeyOf } from '@cairn/evidence-log';
import { Cairn } from '@cairn/sdk';
import { startNatsServers } from '@cairn/testing';
import type { NatsServers } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';

/*
 * A stack under per-service NATS users (docs/adr/0022) on a nats-server of the test's own (the pinned
 * binary, loopback, a free port) that loads the authorization `cairn nats-auth` wrote: each refusal is
 * the real server's, against the real services' credentials, and a whole run still seals.
 */

const QUICKSTART = fileURLToPath(new URL('../../../examples/quickstart.yaml', import.meta.url));

let stack: TestStack;
let nats: NatsServers;
let files: Record<string, string>;
const open: NatsConnection[] = [];

beforeAll(async () => {
  stack = await TestStack.create('nats-auth');
  const written = await stack.cairn(['nats-auth', '--json']);
  expect(written.code, written.stderr).toBe(0);
  const auth = JSON.parse(written.stdout) as { include: string; files: Record<string, string> };
  files = auth.files;
  nats = await startNatsServers({ nodes: 1, label: 'cairn-auth', authorizationFile: auth.include });
  stack.env.CAIRN_NATS_URL = nats.urls;
  await stack.up({ natsAuth: true });
}, 240_000);

afterAll(async () => {
  for (const nc of open) await nc.close().catch(() => undefined);
  await stack?.dispose();
  await nats?.stop();
});

/** A connection as `user` (a service, or `operator`), with its credentials file and, for a service, its inbox prefix. */
async function as(user: string): Promise<NatsConnection> {
  const inboxPrefix = isNatsService(user) ? natsInboxPrefix(user, stack.names.workerId) : undefined;
  const nc = await connect({
    servers: nats.urls,
    authenticator: await natsAuthenticatorFromFile(files[user]!),
    name: `probe-${user}`,
    ...(inboxPrefix === undefined ? {} : { inboxPrefix }),
  });
  open.push(nc);
  return nc;
}

/** What the server answers a request to `subject`: `refused` (a permissions violation) or `answered`. */
async function attempt(nc: NatsConnection, subject: string, body = '{}'): Promise<'refused' | 'answered'> {
  try {
    await nc.request(subject, new TextEncoder().encode(body), { timeout: 3_000 });
    return 'answered';
  } catch (error) {
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : '';
    if (error instanceof Error && /permissions violation/i.test(`${error.message} ${cause}`)) return 'refused';
    throw error;
  }
}

/** Whether the server lets `nc` publish to `subject` (no one listening there is still allowed). */
async function mayPublish(nc: NatsConnection, subject: string): Promise<'refused' | 'allowed'> {
  try {
    await nc.request(subject, new TextEncoder().encode('{}'), { timeout: 3_000 });
    return 'allowed';
  } catch (error) {
    const text = error instanceof Error ? `${error.message} ${error.cause instanceof Error ? error.cause.message : ''}` : String(error);
    if (/permissions violation/i.test(text)) return 'refused';
    if (/no responders|503/i.test(text)) return 'allowed';
    throw error;
  }
}

/** Whether the server lets `nc` subscribe to `subject`: a refused subscription is closed with a permissions violation. */
async function maySubscribe(nc: NatsConnection, subject: string): Promise<'refused' | 'allowed'> {
  const sub = nc.subscribe(subject);
  const outcome = await Promise.race([
    sub.closed.then((error) => (error instanceof Error && /permissions violation/i.test(error.message) ? ('refused' as const) : ('allowed' as const))),
    nc.flush().then(() => new Promise<'allowed'>((resolve) => setTimeout(() => resolve('allowed'), 1_000))),
  ]);
  if (!sub.isClosed()) sub.unsubscribe();
  return outcome;
}

/** Messages the evidence stream holds on `subject` (a filter). */
async function storedOn(subject: string): Promise<number> {
  const jsm = await jetstreamManager(await as('operator'));
  const info = await jsm.streams.info(stack.names.evidenceStream, { subjects_filter: subject });
  return Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0);
}

const prefix = () => `cairn.${stack.stackId}.evidence`;

describe('per-service NATS users on a server that enforces them', () => {
  it('refuses a client without credentials, and one with a key the server does not know', async () => {
    const bare = await connect({ servers: nats.urls, maxReconnectAttempts: 0 }).then(
      () => 'connected',
      (error: unknown) => String(error),
    );
    expect(bare).toMatch(/authoriz/i);
    const viaCairn = await connectNats({ servers: nats.urls, maxReconnectAttempts: 0 }).catch((error: unknown) => error);
    expect(isCairnError(viaCairn) && viaCairn.code).toBe('E_UNAUTHORIZED');
    expect(String(viaCairn)).toContain('CAIRN_NATS_CREDS_FILE is unset');
  });

  it('runs every service as its own user (the server names each connection by its key)', async () => {
    const connz = await nats.monitor<{ connections: { name?: string; authorized_user?: string; nkey?: string }[] }>(nats.nodes[0]!.name, '/connz?auth=true&limit=1024');
    const byName = new Map((connz?.connections ?? []).map((c) => [c.name ?? '', c.nkey ?? c.authorized_user ?? '']));
    for (const service of ['intake', 'policy', 'scheduler', 'runtime', 'kernel', 'verifier', 'grader', 'projector', 'webhooks', 'gateway']) {
      expect(byName.get(`cairn-${service}`), service).toBe(await natsPublicKeyOf(files[service]!));
    }
  });

  it("the gateway's user cannot append to the evidence stream, nor change or delete it", async () => {
    const gateway = await as('gateway');
    const chain = `run_probe_${Date.now().toString(36)}`;
    for (const type of ['run.submitted', 'run.sealed', 'step.completed', 'admin.key_created']) {
      expect(await attempt(gateway, `${prefix()}.${chain}.${type}`), type).toBe('refused');
    }
    expect(await attempt(gateway, `$JS.API.STREAM.DELETE.${stack.names.evidenceStream}`)).toBe('refused');
    expect(await attempt(gateway, `$JS.API.STREAM.UPDATE.${stack.names.evidenceStream}`)).toBe('refused');
    expect(await attempt(gateway, `$JS.API.STREAM.CREATE.PROBE_${Date.now()}`)).toBe('refused');
    // What it may do, it may: read the stream's state.
    expect(await attempt(gateway, `$JS.API.STREAM.INFO.${stack.names.evidenceStream}`)).toBe('answered');
    expect(await storedOn(`${prefix()}.${chain}.>`)).toBe(0);
  });

  it("the runtime's user cannot append run.sealed, grade.recorded or a policy decision", async () => {
    const runtime = await as('runtime');
    const chain = `run_probe_${Date.now().toString(36)}`;
    for (const type of ['run.sealed', 'grade.recorded', 'verification.completed', 'policy.decided', 'run.submitted']) {
      expect(await attempt(runtime, `${prefix()}.${chain}.${type}`), type).toBe('refused');
    }
    expect(await storedOn(`${prefix()}.${chain}.>`)).toBe(0);
  });

  it("the projector's user can publish nothing but its acks and reads", async () => {
    const projector = await as('projector');
    const chain = `run_probe_${Date.now().toString(36)}`;
    for (const type of EVENT_TYPES) expect(await attempt(projector, `${prefix()}.${chain}.${type}`), type).toBe('refused');
    expect(await attempt(projector, `cairn.${stack.stackId}.cmd.submit`)).toBe('refused');
    expect(await attempt(projector, `$KV.${stack.names.leasesBucket}.${chain}`)).toBe('refused');
    expect(await attempt(projector, `$JS.API.CONSUMER.MSG.NEXT.${stack.names.evidenceStream}.cairn-grader`, '{"batch":1,"expires":1000000000}')).toBe('refused');
    expect(await attempt(projector, `$JS.API.STREAM.PURGE.${stack.names.evidenceStream}`)).toBe('refused');
    expect(await attempt(projector, `$JS.API.STREAM.INFO.${stack.names.evidenceStream}`)).toBe('answered');
    expect(await storedOn(`${prefix()}.${chain}.>`)).toBe(0);
  });

  it("no service reads another's replies or forges one: each subscribes only to its own inboxes, and answers only into those of whom it serves", async () => {
    const worker = stack.names.workerId;
    const kernel = await as('kernel');
    expect(await maySubscribe(kernel, `${natsInboxPrefix('kernel', worker)}.x`)).toBe('allowed');
    for (const subject of ['_INBOX.>', '_INBOX_gateway.>', `${natsInboxPrefix('runtime', worker)}.>`, '>']) expect(await maySubscribe(kernel, subject), subject).toBe('refused');
    // The kernel answers nobody: it may publish into no inbox, not even its own.
    for (const subject of ['_INBOX.x', '_INBOX_gateway.x', `${natsInboxPrefix('runtime', worker)}.x`]) expect(await mayPublish(kernel, subject), subject).toBe('refused');
    // Intake answers the commands' sender (the gateway), and nobody else.
    const intake = await as('intake');
    expect(await mayPublish(intake, '_INBOX_gateway.forged')).toBe('allowed');
    for (const subject of ['_INBOX.x', '_INBOX_webhooks.x', `${natsInboxPrefix('runtime', worker)}.x`]) expect(await mayPublish(intake, subject), subject).toBe('refused');
    // A worker answers the gateway's sandbox ops; the gateway answers a worker's requests for a file's chunks.
    const runtime = await as('runtime');
    expect(await mayPublish(runtime, '_INBOX_gateway.op')).toBe('allowed');
    expect(await mayPublish(runtime, '_INBOX_intake.x')).toBe('refused');
    expect(await maySubscribe(runtime, '_INBOX_gateway.>')).toBe('refused');
    const gateway = await as('gateway');
    expect(await mayPublish(gateway, `${natsInboxPrefix('runtime', worker)}.chunks.abc`)).toBe('allowed');
    // …and nothing else of a worker's: not the publish ack of a receipt it sees on a chain it watches.
    expect(await mayPublish(gateway, `${natsInboxPrefix('runtime', worker)}.Ab12Cd.7`)).toBe('refused');
    expect(await maySubscribe(gateway, `${natsInboxPrefix('runtime', worker)}.>`)).toBe('refused');
  });

  it("an operator's drain under them: the gateway writes it, the runtime cannot lift it, the scheduler only reads it", async () => {
    const drains = `${stack.names.workersBucket}_drains`;
    const drained = await stack.cairn(['workers', 'drain', stack.names.workerId, '--json']);
    expect(drained.code, `${drained.stdout}\n${drained.stderr}\n${await stack.logs()}`).toBe(0);
    expect(JSON.parse(drained.stdout)).toMatchObject({ ok: true, worker: { status: 'draining', drain: { by: expect.stringMatching(/^key:/) as unknown } } });
    expect(await attempt(await as('runtime'), `$KV.${drains}.${stack.names.workerId}`)).toBe('refused');
    expect(await attempt(await as('scheduler'), `$KV.${drains}.${stack.names.workerId}`)).toBe('refused');
    const undrained = await stack.cairn(['workers', 'undrain', stack.names.workerId, '--json']);
    expect(undrained.code, undrained.stdout + undrained.stderr).toBe(0);
    expect(JSON.parse(undrained.stdout)).toMatchObject({ ok: true, worker: { status: 'eligible', drain: null } });
  });

  it("policy's user may make an ordered consumer for its usage ledger but not touch another durable; the webhooks user takes its replays, registrations and deletions and no intake command", async () => {
    const policy = await as('policy');
    const ev = stack.names.evidenceStream;
    const cmd = stack.names.commandStream;
    expect(await attempt(policy, `$JS.API.CONSUMER.INFO.${ev}.probe_ordered`)).toBe('answered');
    expect(await attempt(policy, `$JS.API.CONSUMER.DELETE.${ev}.cairn-grader`)).toBe('refused');
    expect(await attempt(policy, `$JS.API.CONSUMER.MSG.NEXT.${ev}.cairn-scheduler`, '{"batch":1,"expires":1000000000}')).toBe('refused');
    const webhooks = await as('webhooks');
    expect(await attempt(webhooks, `$JS.API.CONSUMER.INFO.${cmd}.cairn-webhooks-cmd-webhook-replay`)).toBe('answered');
    expect(await attempt(webhooks, `$JS.API.CONSUMER.MSG.NEXT.${cmd}.cairn-intake-submit`, '{"batch":1,"expires":1000000000}')).toBe('refused');
    expect(await attempt(webhooks, `cairn.${stack.stackId}.cmd.submit`)).toBe('refused');
    expect(await attempt(await as('intake'), `$JS.API.CONSUMER.MSG.NEXT.${cmd}.cairn-webhooks-cmd-webhook-replay`, '{"batch":1,"expires":1000000000}')).toBe('refused');
    // Registrations and deletions too (ADR 0027's addendum): the webhooks user takes them, intake may not, only the gateway sends them.
    for (const verb of ['webhook_register', 'webhook_delete']) {
      const durable = `cairn-webhooks-cmd-${verb.replace('_', '-')}`;
      expect(await attempt(webhooks, `$JS.API.CONSUMER.INFO.${cmd}.${durable}`), verb).toBe('answered');
      expect(await attempt(await as('intake'), `$JS.API.CONSUMER.MSG.NEXT.${cmd}.${durable}`, '{"batch":1,"expires":1000000000}'), verb).toBe('refused');
      expect(await attempt(webhooks, `cairn.${stack.stackId}.cmd.${verb}`), verb).toBe('refused');
      expect(await attempt(await as('intake'), `cairn.${stack.stackId}.cmd.${verb}`), verb).toBe('refused');
    }
  });

  it("only the gateway's user writes the secret catalog: policy's and the workers' users read it and cannot write it; a secret set through the gateway reaches a run (ADR 0028)", async () => {
    const catalog = stack.names.secretsBucket;
    for (const service of ['policy', 'runtime', 'kernel', 'verifier', 'grader', 'projector', 'intake', 'scheduler', 'webhooks']) {
      expect(await attempt(await as(service), `$KV.${catalog}.default.PROBE_TOKEN`), service).toBe('refused');
    }
    for (const service of ['policy', 'runtime', 'grader']) expect(await attempt(await as(service), `$JS.API.STREAM.INFO.KV_${catalog}`), service).toBe('answered');
    for (const service of ['projector', 'intake', 'webhooks']) expect(await attempt(await as(service), `$JS.API.STREAM.INFO.KV_${catalog}`), service).toBe('refused');

    const value = `nats-auth-${Date.now().toString(36)}-value`;
    const set = await stack.api('/v1/secrets/NATS_AUTH_TOKEN', { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: value });
    expect(set.status, await set.clone().text()).toBe(200);
    const path = await stack.specFile('uses-secret', {
      name: 'reads a secret under per-service users',
      image: 'cairn/sandbox-busybox:1',
      secrets: ['NATS_AUTH_TOKEN'],
      steps: [{ argv: ['sh', '-c', 'wc -c < /run/secrets/NATS_AUTH_TOKEN'] }],
      checks: [{ id: 'length', source: 'steps[0].stdout', op: 'contains', value: String(value.length), weight: 1 }],
    });
    const run = await stack.cairn(['run', path, '--wait', '--json']);
    expect(run.code, `${run.stdout}\n${run.stderr}\n${await stack.logs()}`).toBe(0);
    const outcome = JSON.parse(run.stdout) as { runId: string };
    // Mounted and read: the check on its length holds (a run without tests is INCONCLUSIVE, not SUPPORTS).
    expect(await stack.getRun(outcome.runId)).toMatchObject({ state: 'SEALED', score: 1, maxScore: 1, errorCode: null });
  }, 120_000);

  it('a whole run seals under per-service users, and its chain exports and verifies', async () => {
    const run = await stack.cairn(['run', QUICKSTART, '--wait', '--json']);
    expect(run.code, `${run.stdout}\n${run.stderr}\n${await stack.logs()}`).toBe(0);
    const outcome = JSON.parse(run.stdout) as { runId: string; state: string; verdict: string };
    expect(outcome).toMatchObject({ state: 'SEALED', verdict: 'SUPPORTS' });
    await stack.expectCleanAndVerifiable(outcome.runId);
  }, 120_000);

  it('a sandbox session works under them: ops to the worker, a file in and out through the gateway, its chain verifies', async () => {
    const created = await stack.cairn(['sandbox', 'create', '--memory', '64', '--cpus', '0.5', '--ttl', '600', '--json']);
    expect(created.code, `${created.stdout}\n${created.stderr}\n${await stack.logs()}`).toBe(0);
    const id = (JSON.parse(created.stdout) as { id: string }).id;
    const file = await stack.specFile('payload', { hello: 'through the gateway' });
    const copied = await stack.cairn(['sandbox', 'cp', file, `${id}:/work/payload.json`, '--json']);
    expect(copied.code, copied.stderr).toBe(0);
    const exec = await stack.cairn(['sandbox', 'exec', id, '--', 'cat', '/work/payload.json']);
    expect(exec.code, exec.stderr).toBe(0);
    expect(exec.stdout).toContain('through the gateway');
    const out = await stack.cairn(['sandbox', 'cp', `${id}:/work/payload.json`, '-']);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toContain('through the gateway');
    const removed = await stack.cairn(['sandbox', 'rm', id, '--json']);
    expect(removed.code, removed.stderr).toBe(0);
    const verified = await stack.cairn(['verify', id, '--json']);
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
  }, 120_000);

  it('an image build works under them: the gateway sends it to the worker, serves the context in chunks, and gets the answer (ADR 0038)', async () => {
    const label = `nats-auth-${process.pid}-${Date.now()}`;
    const client = new Cairn({ url: stack.url, apiKey: stack.apiKey });
    const { createDockerClient } = await import('@cairn/sandbox-docker');
    const docker = createDockerClient();
    try {
      // Over one 512 KiB chunk, so the worker asks for two.
      const built = await client.images.build(`FROM cairn/sandbox-busybox:1\nLABEL io.cairn.test=${label}\nCOPY blob.bin /opt/blob.bin\n`, [{ path: 'blob.bin', content: new Uint8Array(600 * 1024).fill(7) }]);
      expect(built).toMatchObject({ workerId: stack.names.workerId, imageBuild: { cached: false } });
    } finally {
      for (const image of await docker.listImages({ filters: { label: [`io.cairn.test=${label}`] } })) await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
    }
  }, 120_000);

  it('refused no service anything while it worked: the server logged no violation by a cairn-* connection', async () => {
    const log = await nats.logTail(nats.nodes[0]!.name, 1_000_000);
    const violations = log.split('\n').filter((line) => /violation/i.test(line) && !/probe-/.test(line));
    expect(violations).toEqual([]);
    // The probes' refusals are there: the server logs what it refuses.
    expect(log).toMatch(/probe-gateway.*Publish Violation/);
  });
});
