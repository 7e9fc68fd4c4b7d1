import 'reflect-metadata';
import { HealthSchema, SubmitAcceptedSchema } from '@cairn/contracts';
import { connect as connectTcp } from 'node:net';
import { loadConfig } from '@cairn/config';
import type { RunSpec } from '@cairn/contracts';
import { bucketStreamName } from '@cairn/operational';
import { migrate } from '@cairn/persistence';
import { JsonLogger } from '@cairn/service-kit';
import { createTestDatabase, provisionKey, revokeKey, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGatewayDataSource } from '../src/gateway-data-source.js';
import { BODY_LIMIT_BYTES, GatewayConfigSchema } from '../src/gateway.config.js';
import type { GatewayConfig } from '../src/gateway.config.js';
import { startGateway } from '../src/start-gateway.js';
import type { RunningGateway } from '../src/start-gateway.js';
import { http, INTAKE_MAIN, PROJECTOR_MAIN, startServiceProcess, waitFor } from './gateway.harness.js';
import type { HttpAnswer, ServiceProcess } from './gateway.harness.js';

/*
 * The bad-input suite for REST: every way a request can be wrong, each answered with its precise
 * code — and each shown to change nothing: no command published, no receipt appended, no run or
 * event projected (counted before and after every case). The gateway runs in-process on its own
 * streams and database, with intake and the projector as the processes they are.
 * (gateway.e2e.spec.ts keeps the basic cases: a missing Idempotency-Key, a plain 1.5 MiB body,
 * GET /v1/runs with bad keys, reads of another tenant's runs.)
 */

const BOOTSTRAP_KEY = `cairn_badinput_${'B'.repeat(43)}`;
const SPEC: RunSpec = { name: 'bad input', steps: [{ argv: ['echo', 'hello'] }] };
/** A Cyrillic small a (U+0430), which looks like the Latin one. */
const CYRILLIC_A = '\u0430';

let db: TestDatabase;
let config: GatewayConfig;
let gateway: RunningGateway;
let base: string;
let nc: NatsConnection;
let jsm: JetStreamManager;
let keysDb: DataSource;
let liveRunId: string;
const services: ServiceProcess[] = [];
const keys = { writer: '', other: '', expired: '', revoked: '', writerPrefix: '', admin: '' };
const NUL = '\u0000';

interface Footprint {
  commands: number;
  evidence: number;
  runs: number;
  sandboxes: number;
  events: number;
  poisoned: number;
  webhooks: number;
}

/** Everything a request could have changed: the command and evidence streams, the projections (and what they refused), the webhooks. */
async function footprint(): Promise<Footprint> {
  const lastSeq = async (stream: string) => (await jsm.streams.info(stream).catch(() => null))?.state.last_seq ?? 0;
  const [[runs], [sandboxes], [events], [poisoned], [webhooks]] = await Promise.all([
    keysDb.query<{ n: number }[]>('SELECT count(*)::int AS n FROM runs'),
    keysDb.query<{ n: number }[]>('SELECT count(*)::int AS n FROM sandboxes'),
    keysDb.query<{ n: number }[]>('SELECT count(*)::int AS n FROM evidence_events'),
    keysDb.query<{ n: number }[]>('SELECT count(*)::int AS n FROM poison_events'),
    keysDb.query<{ n: number }[]>('SELECT count(*)::int AS n FROM webhooks'),
  ]);
  return {
    commands: await lastSeq(config.CAIRN_COMMAND_STREAM),
    evidence: await lastSeq(config.CAIRN_EVIDENCE_STREAM),
    runs: runs!.n,
    sandboxes: sandboxes!.n,
    events: events!.n,
    poisoned: poisoned!.n,
    webhooks: webhooks!.n,
  };
}

/**
 * Sends, then checks the answer's status and code (and that the message names `mentions`), and
 * that nothing changed. `decidedByIntake`: the refusal is intake's (idempotency, another tenant's
 * run), so the request did reach it as a command on the work queue — and still nothing was
 * appended or projected.
 */
async function expectRefused(send: () => Promise<HttpAnswer>, status: number, code: string, mentions?: string, decidedByIntake = false): Promise<HttpAnswer> {
  const before = await footprint();
  const answer = await send();
  expect(answer.status, answer.text.slice(0, 500)).toBe(status);
  expect(answer.body).toMatchObject({ code });
  if (mentions !== undefined) expect((answer.body as { message: string }).message).toContain(mentions);
  // Give an accepted command the time intake and the projector would need to show it.
  await new Promise((resolve) => setTimeout(resolve, 50));
  const after = await footprint();
  if (decidedByIntake) {
    expect(after.commands).toBe(before.commands + 1);
    expect({ ...after, commands: before.commands }).toEqual(before);
  } else expect(after).toEqual(before);
  return answer;
}

function submitJson(body: unknown, headers: Record<string, string> = {}, key: string | null = keys.writer): Promise<HttpAnswer> {
  return http(base, 'POST', '/v1/runs', { key, body, headers: { 'idempotency-key': uniqueName('idem'), ...headers } });
}

function submitRaw(rawBody: string, headers: Record<string, string> = {}): Promise<HttpAnswer> {
  return http(base, 'POST', '/v1/runs', { key: keys.writer, rawBody, headers: { 'idempotency-key': uniqueName('idem'), ...headers } });
}

/** A valid spec's JSON with `member` (raw JSON text) spliced in after its first member. */
function withMember(member: string, spec: RunSpec = SPEC): string {
  const text = JSON.stringify(spec);
  const firstComma = text.indexOf(',');
  return `${text.slice(0, firstComma + 1)}${member},${text.slice(firstComma + 1)}`;
}

/** UTF-8 text as the bytes of a header value (Fetch sends header values as Latin-1 bytes). */
function headerBytes(text: string): string {
  return Buffer.from(text, 'utf8').toString('latin1');
}

interface RawAnswer extends HttpAnswer {
  raw: string;
}

/**
 * One HTTP/1.1 request over a plain socket, for what Fetch will not send (control characters in a
 * header, a chunked body that never ends); `body` chunks are written until the server answers.
 */
async function rawRequest(head: string, chunks: Buffer[] = []): Promise<RawAnswer> {
  const url = new URL(base);
  const socket = connectTcp({ host: url.hostname, port: Number(url.port) });
  socket.on('error', () => undefined);
  const received: Buffer[] = [];
  let answered = false;
  const closed = new Promise<void>((resolve) => {
    socket.on('data', (chunk: Buffer) => {
      answered = true;
      received.push(chunk);
    });
    socket.on('close', () => resolve());
  });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(head);
  for (const chunk of chunks) {
    if (answered || socket.destroyed) break;
    await new Promise<void>((resolve) => socket.write(chunk, () => resolve()));
  }
  const timer = setTimeout(() => socket.destroy(), 10_000);
  await closed;
  clearTimeout(timer);
  const raw = Buffer.concat(received).toString('utf8');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);
  const text = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  let body: unknown = undefined;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status, headers: new Headers(), body, text, raw };
}

function requestHead(method: string, path: string, headers: Record<string, string>): string {
  const url = new URL(base);
  const lines = [`${method} ${path} HTTP/1.1`, `Host: ${url.host}`, 'Connection: close', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  return `${lines.join('\r\n')}\r\n\r\n`;
}

beforeAll(async () => {
  db = await createTestDatabase('gateway_bad_input');
  await migrate(db.url);
  const env = {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_EVIDENCE_STREAM: uniqueName('BI_EVIDENCE').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('bi_ev').toLowerCase(),
    CAIRN_COMMAND_STREAM: uniqueName('BI_COMMANDS').toUpperCase(),
    CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName('bi_cmd').toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName('bi_workers'),
    CAIRN_LEASES_BUCKET: uniqueName('bi_leases'),
  };
  config = loadConfig(GatewayConfigSchema, { ...env, CAIRN_GATEWAY_PORT: '0', CAIRN_API_KEY: BOOTSTRAP_KEY });
  nc = await connect({ servers: testNatsUrl() });
  jsm = await jetstreamManager(nc);
  services.push(startServiceProcess('intake', INTAKE_MAIN, env), startServiceProcess('projector', PROJECTOR_MAIN, env));
  gateway = await startGateway(config, { logger: new JsonLogger('gateway', 'warn', () => undefined) });
  base = gateway.url;

  keysDb = createGatewayDataSource(db.url, 2);
  await keysDb.initialize();
  // Test keys are made as the product makes them: through POST /v1/keys with the operator's key.
  // Far enough ahead that a loaded machine still makes it before it passes.
  const expiresAt = Date.now() + 5_000;
  const expiring = provisionKey(base, BOOTSTRAP_KEY, { tenant: 'acme', scopes: ['runs:read', 'runs:write'], expiresAt: new Date(expiresAt).toISOString() });
  const writer = await provisionKey(base, BOOTSTRAP_KEY, { tenant: 'acme', scopes: ['runs:read', 'runs:write'] });
  keys.writer = writer.key;
  keys.writerPrefix = writer.key.slice('cairn_'.length, 'cairn_'.length + 8);
  keys.other = (await provisionKey(base, BOOTSTRAP_KEY, { tenant: 'globex', scopes: ['runs:read', 'runs:write'] })).key;
  keys.admin = (await provisionKey(base, BOOTSTRAP_KEY, { tenant: 'acme', scopes: ['admin'] })).key;
  const revoked = await provisionKey(base, BOOTSTRAP_KEY, { tenant: 'acme', scopes: ['runs:read', 'runs:write'] });
  await revokeKey(base, BOOTSTRAP_KEY, revoked.id);
  keys.revoked = revoked.key;
  keys.expired = (await expiring).key;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt + 50 - Date.now())));

  await waitFor('intake and projector up', async () => {
    const health = HealthSchema.parse((await http(base, 'GET', '/v1/health')).body);
    return health.checks.services.intake === 'ok' && health.checks.services.projector === 'ok';
  });
  // One accepted run of tenant acme, projected, for the cases that aim at an existing run.
  const accepted = await submitJson({ ...SPEC, name: 'the live run' });
  expect(accepted.status, accepted.text).toBe(202);
  liveRunId = SubmitAcceptedSchema.parse(accepted.body).runId;
  await waitFor('the live run projected', async () => (await http(base, 'GET', `/v1/runs/${liveRunId}`, { key: keys.writer })).status === 200);
  // The keys' admin receipts too: nothing is still on its way when the footprints are compared.
  await waitFor('every receipt projected', async () => {
    const now = await footprint();
    return now.events === now.evidence;
  });
});

afterAll(async () => {
  await gateway?.close();
  await Promise.all(services.map((service) => service.stop()));
  await keysDb?.destroy();
  if (jsm !== undefined) {
    for (const stream of [config.CAIRN_EVIDENCE_STREAM, config.CAIRN_COMMAND_STREAM, bucketStreamName(config.CAIRN_WORKERS_BUCKET)]) {
      await jsm.streams.delete(stream).catch(() => false);
    }
  }
  await nc?.close();
  await db?.drop();
});

describe('bodies: refused before anything is read into a spec', () => {
  it('413 E_TOO_LARGE for 1.5 MiB that is not even JSON: the size is checked before parsing', async () => {
    await expectRefused(() => submitRaw(`{"name":"${'x'.repeat(1.5 * 1024 * 1024)}`), 413, 'E_TOO_LARGE');
  });

  it('413 E_TOO_LARGE for a chunked body with no Content-Length that grows past the limit', async () => {
    const head = requestHead('POST', '/v1/runs', {
      Authorization: `Bearer ${keys.writer}`,
      'Idempotency-Key': uniqueName('idem'),
      'Content-Type': 'application/json',
      'Transfer-Encoding': 'chunked',
    });
    const piece = Buffer.from('x'.repeat(64 * 1024));
    const chunk = Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]);
    const chunks = [Buffer.from(`9\r\n{"name":"\r\n`), ...Array.from({ length: Math.ceil((BODY_LIMIT_BYTES * 1.5) / piece.length) }, () => chunk)];
    await expectRefused(() => rawRequest(head, chunks), 413, 'E_TOO_LARGE');
  });

  it('413 E_TOO_LARGE for headers past the HTTP parser\'s limit (a 20 000-character Idempotency-Key), in the error shape', async () => {
    await expectRefused(() => submitJson(SPEC, { 'idempotency-key': 'k'.repeat(20_000) }), 413, 'E_TOO_LARGE');
  });

  it('E_INPUT for JSON nested deeper than any spec (10 000 levels), naming where', async () => {
    const deep = withMember(`"x":${'['.repeat(10_000)}${']'.repeat(10_000)}`);
    await expectRefused(() => submitRaw(deep), 400, 'E_INPUT', 'JSON nested deeper than 64 levels');
  });

  it.each([
    ['a top-level member', withMember('"name":"the other name"'), 'name: duplicate key'],
    ['argv twice in a step: which one runs?', '{"name":"x","steps":[{"argv":["true"],"argv":["rm","-rf","/work"]}]}', 'steps[0].argv: duplicate key'],
    ['a name spelt with an escape', withMember('"n\\u0061me":"escaped"'), 'name: duplicate key'],
    ['a cap given twice', withMember('"caps":{"pids":8,"pids":256}'), 'caps.pids: duplicate key'],
  ])('E_INPUT for a duplicate key — %s', async (_what, text, mentions) => {
    await expectRefused(() => submitRaw(text), 400, 'E_INPUT', mentions);
  });

  it.each([
    ['__proto__', withMember('"__proto__":{"privileged":true}')],
    ['constructor.prototype', withMember('"constructor":{"prototype":{"privileged":true}}')],
  ])('E_INPUT for a prototype-poisoning member (%s)', async (_what, text) => {
    await expectRefused(() => submitRaw(text), 400, 'E_INPUT');
  });

  it('E_INPUT for a body that is not valid UTF-8 (never decoded loosely into U+FFFD)', async () => {
    const bytes = Buffer.concat([Buffer.from('{"name":"bad '), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('","steps":[{"argv":["echo"]}]}')]);
    const head = requestHead('POST', '/v1/runs', {
      Authorization: `Bearer ${keys.writer}`,
      'Idempotency-Key': uniqueName('idem'),
      'Content-Type': 'application/json',
      'Content-Length': String(bytes.length),
    });
    await expectRefused(() => rawRequest(head, [bytes]), 400, 'E_INPUT', 'not valid UTF-8');
  });

  it('E_INPUT for a media type nobody parses (a form), with the error shape', async () => {
    await expectRefused(() => submitRaw('name=x&steps=echo', { 'content-type': 'application/x-www-form-urlencoded' }), 400, 'E_INPUT');
  });

  it.each([
    ['a shell string instead of a spec', '"echo hello; rm -rf /work"'],
    ['null', 'null'],
    ['a number', '42'],
  ])('E_INPUT naming (root) for %s', async (_what, text) => {
    await expectRefused(() => submitRaw(text), 400, 'E_INPUT', '(root)');
  });
});

describe('commands: argv arrays only (I-3), no NUL, paths only where a sandbox writes', () => {
  const step = (more: Record<string, unknown>) => ({ ...SPEC, steps: [{ argv: ['echo', 'hi'], ...more }] });
  it.each([
    ['steps as one shell string', { ...SPEC, steps: 'echo hi && rm -rf /' }, 'steps:'],
    ['a step as one shell string', { ...SPEC, steps: ['echo hi && rm -rf /'] }, 'steps[0]:'],
    ['a shell string in `command`', step({ command: 'echo hi && rm -rf /' }), 'steps[0].command: unknown field'],
    ['argv nested in argv', step({ argv: [['sh', '-c', 'id']] }), 'steps[0].argv[0]:'],
    ['an empty argv', step({ argv: [] }), 'steps[0].argv:'],
    ['a NUL byte in an argument', step({ argv: ['sh', '-c\u0000rm -rf /work'] }), 'steps[0].argv[1]:'],
    ['a NUL byte in an environment value', step({ env: { GREETING: 'hi\u0000there' } }), 'steps[0].env.GREETING:'],
    ['workdir /proc/self/fd/3', step({ workdir: '/proc/self/fd/3' }), 'steps[0].workdir:'],
    ['workdir climbing out of /work', step({ workdir: '/work/../proc' }), 'steps[0].workdir:'],
    ['workdir at the Docker socket', step({ workdir: '/var/run/docker.sock' }), 'steps[0].workdir:'],
    ['an input file over /etc/passwd', { ...SPEC, files: [{ path: '/etc/passwd', content: 'root::0:0::/:/bin/sh' }] }, 'files[0].path:'],
    ['an input file at the Docker socket', { ...SPEC, files: [{ path: '/var/run/docker.sock', content: 'x' }] }, 'files[0].path:'],
    ['an output at the Docker socket', { ...SPEC, outputs: ['/var/run/docker.sock'] }, 'outputs[0]:'],
    ['an output of the whole root', { ...SPEC, outputs: ['/'] }, 'outputs[0]:'],
    ['retries over the frozen 3', { ...SPEC, retries: 4 }, 'retries:'],
    ['retries as a string', { ...SPEC, retries: '1' }, 'retries:'],
  ])('E_INPUT for %s', async (_what, body, mentions) => {
    await expectRefused(() => submitJson(body), 400, 'E_INPUT', mentions);
  });
});

describe('privileged fields: refused, named, never ignored', () => {
  it.each([
    ['privileged on a step', { ...SPEC, steps: [{ argv: ['id'], privileged: true }] }, 'steps[0].privileged: unknown field'],
    ['mounts of the Docker socket', { ...SPEC, mounts: [{ source: '/var/run/docker.sock', target: '/var/run/docker.sock' }] }, 'mounts: unknown field'],
    ['volumes', { ...SPEC, volumes: ['/:/host'] }, 'volumes: unknown field'],
    ['binds', { ...SPEC, binds: ['/var/run/docker.sock:/var/run/docker.sock'] }, 'binds: unknown field'],
    ["network 'host'", { ...SPEC, network: 'host' }, 'network:'],
    ["network 'bridge'", { ...SPEC, network: 'bridge' }, 'network:'],
    ['network { mode: host }', { ...SPEC, network: { mode: 'host' } }, 'network:'],
    ['capAdd', { ...SPEC, capAdd: ['SYS_ADMIN'] }, 'capAdd: unknown field'],
    ['capabilities', { ...SPEC, capabilities: ['ALL'] }, 'capabilities: unknown field'],
    ['a capability among the caps', { ...SPEC, caps: { pids: 16, capAdd: ['NET_RAW'] } }, 'caps.capAdd: unknown field'],
    ['devices', { ...SPEC, devices: ['/dev/kvm'] }, 'devices: unknown field'],
    ["user 'root'", { ...SPEC, user: 'root' }, 'user: unknown field'],
    ["a step's user 0:0", { ...SPEC, steps: [{ argv: ['id'], user: '0:0' }] }, 'steps[0].user: unknown field'],
    ['securityOpt seccomp=unconfined', { ...SPEC, securityOpt: ['seccomp=unconfined'] }, 'securityOpt: unknown field'],
    ['pidMode host', { ...SPEC, pidMode: 'host' }, 'pidMode: unknown field'],
    ['an image that is the Docker socket', { ...SPEC, image: 'unix:///var/run/docker.sock' }, 'image:'],
  ])('E_INPUT for %s', async (_what, body, mentions) => {
    await expectRefused(() => submitJson(body), 400, 'E_INPUT', mentions);
  });
});

describe('ids and names: look-alike and control characters', () => {
  const lookAlike = `run_${CYRILLIC_A}bc123`;
  it.each([
    ['GET', `/v1/runs/${encodeURIComponent(lookAlike)}`],
    ['GET', `/v1/runs/${encodeURIComponent(lookAlike)}/events`],
    ['GET', `/v1/runs/${encodeURIComponent(lookAlike)}/bundle`],
    ['GET', `/v1/runs/${encodeURIComponent(lookAlike)}/events/stream`],
    ['POST', `/v1/runs/${encodeURIComponent(lookAlike)}/cancel`],
    ['GET', '/v1/runs/run_abc%0Adef'],
    ['GET', '/v1/runs/run_abc%00def'],
    ['POST', '/v1/runs/run_abc%1B%5B2Jdef/cancel'],
    ['POST', '/v1/runs/run_abc%2F..%2F..%2Fcancel/cancel'],
  ] as const)('E_INPUT for a run id with a look-alike or control character: %s %s', async (method, path) => {
    await expectRefused(() => http(base, method, path, { key: keys.writer }), 400, 'E_INPUT', 'id');
  });

  it.each(['0', '5', '1.5', 'one', '-1'])("E_INPUT for a step output's attempt=%s (ADR 0035: 1 to 4, a whole number), naming attempt", async (attempt) => {
    await expectRefused(() => http(base, 'GET', `/v1/runs/${liveRunId}/steps/0/stdout?attempt=${attempt}`, { key: keys.writer }), 400, 'E_INPUT', 'attempt');
  });

  it('E_INPUT for the look-alike of a real run id (a fullwidth ｒ, which NFKC would fold to r): it is not that run', async () => {
    const lookAlikeOfLive = `\uff52${liveRunId.slice(1)}`;
    expect(lookAlikeOfLive.normalize('NFKC')).toBe(liveRunId);
    await expectRefused(() => http(base, 'POST', `/v1/runs/${encodeURIComponent(lookAlikeOfLive)}/cancel`, { key: keys.writer }), 400, 'E_INPUT', 'id');
  });

  it.each([
    ['Cyrillic letters', headerBytes(`ключ-${CYRILLIC_A}`)],
    ['a tab', 'key\twith-tab'],
    ['spaces only', '   '],
    ['201 characters', 'k'.repeat(201)],
  ])('E_INPUT for an Idempotency-Key with %s', async (_what, value) => {
    await expectRefused(() => submitJson(SPEC, { 'idempotency-key': value }), 400, 'E_INPUT', 'Idempotency-Key');
  });

  it.each([
    ['an Idempotency-Key', (key: string) => ({ Authorization: `Bearer ${key}`, 'Idempotency-Key': 'key\u0001\u001b[31m' })],
    ['the Authorization header', (key: string) => ({ Authorization: `Bearer ${key}\u0008`, 'Idempotency-Key': uniqueName('idem') })],
  ])('400 for a control character in %s, which no client library will send (the HTTP parser refuses it)', async (_what, headers) => {
    const body = JSON.stringify(SPEC);
    const head = requestHead('POST', '/v1/runs', { ...headers(keys.writer), 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) });
    const before = await footprint();
    const answer = await rawRequest(head, [Buffer.from(body)]);
    expect(answer.status, answer.raw.slice(0, 300)).toBe(400);
    expect(answer.body, answer.raw.slice(0, 300)).toMatchObject({ code: 'E_INPUT' });
    expect(await footprint()).toEqual(before);
  });

  it.each([
    ['a BEL in the run name', { ...SPEC, name: 'ding\u0007' }, 'name: no control characters'],
    ['an ANSI escape in the run name', { ...SPEC, name: 'red \u001b[31m' }, 'name: no control characters'],
    ['a newline in the run name', { ...SPEC, name: 'line\nbreak' }, 'name: no control characters'],
    ['a C1 control (NEL) in the run name', { ...SPEC, name: 'next\u0085line' }, 'name: no control characters'],
    ['a Cyrillic letter in the job name', { ...SPEC, job: `n${CYRILLIC_A}ghtly` }, 'job:'],
    ['a Cyrillic letter in a step name', { ...SPEC, steps: [{ name: `build-${CYRILLIC_A}`, argv: ['id'] }] }, 'steps[0].name:'],
    ['a Cyrillic letter in a check id', { ...SPEC, checks: [{ id: `ex${CYRILLIC_A}ct`, source: 'steps[0].exit_code', op: 'eq', value: 0, weight: 1 }] }, 'checks[0].id:'],
    ['a Cyrillic letter in a secret name', { ...SPEC, secrets: ['\u0410PI_KEY'] }, 'secrets[0]:'],
    ['a Cyrillic letter in an environment name', { ...SPEC, steps: [{ argv: ['id'], env: { ['P\u0410TH']: '/tmp' } }] }, 'steps[0].env'],
  ])('E_INPUT for %s', async (_what, body, mentions) => {
    await expectRefused(() => submitJson(body), 400, 'E_INPUT', mentions);
  });
});

describe('text a receipt or a projection stores: a NUL (U+0000) is refused at the edge, naming the field', () => {
  const checks = [{ id: 'exit', source: 'steps[0].exit_code', op: 'eq', value: 0 }];
  const gated = (value: string) => ({
    name: 'gated',
    steps: [{ argv: ['true'] }, { name: 'patch', argv: ['true'] }, { argv: ['true'] }],
    outputs: ['/out'],
    gate: { patchStep: 'patch', patch: '/out/fix.diff', checks: [{ id: 'same', before: 'steps[0].stdout', after: 'steps[2].stdout', op: 'eq', value }] },
  });
  const step = (more: Record<string, unknown>) => ({ ...SPEC, steps: [{ argv: ['echo', 'hi'], ...more }] });
  it.each([
    ['claim.statement', { ...SPEC, claim: { statement: `holds${NUL}`, checks } }, 'claim.statement: a statement may not contain NUL (U+0000)'],
    ['a file with no encoding (utf8)', { ...SPEC, files: [{ path: '/work/a', content: `ELF${NUL}` }] }, 'files[0].content: file content may not contain NUL (U+0000); send a binary file base64-encoded'],
    ['a file with encoding utf8', { ...SPEC, files: [{ path: '/work/a', content: `a${NUL}b`, encoding: 'utf8' }] }, 'files[0].content: file content may not contain NUL'],
    ['a check value', { ...SPEC, checks: [{ id: 'out', source: 'steps[0].stdout', op: 'contains', value: `hello${NUL}`, weight: 1 }] }, 'checks[0].value: a check value may not contain NUL'],
    ['an eq check value', { ...SPEC, checks: [{ id: 'out', source: 'steps[0].stdout', op: 'eq', value: `hello${NUL}\n`, weight: 1 }] }, 'checks[0].value: a check value may not contain NUL'],
    ['a claim check value', { ...SPEC, claim: { checks: [{ id: 'out', source: 'steps[0].stdout', op: 'not_contains', value: NUL }] } }, 'claim.checks[0].value: a check value may not contain NUL'],
    ['a gate check value', gated(`ok${NUL}`), 'gate.checks[0].value: a check value may not contain NUL'],
    ['the run name', { ...SPEC, name: `a${NUL}b` }, 'name: no control characters'],
    ['the job name', { ...SPEC, job: `nightly${NUL}` }, 'job:'],
    ['a step name', step({ name: `build${NUL}` }), 'steps[0].name:'],
    ['the image', { ...SPEC, image: `cairn/sandbox:1${NUL}` }, 'image:'],
    ['an environment name', step({ env: { [`A${NUL}B`]: '1' } }), 'steps[0].env'],
    ['the workdir', step({ workdir: `/work/a${NUL}b` }), 'steps[0].workdir:'],
    ['an input file path', { ...SPEC, files: [{ path: `/work/a${NUL}b`, content: 'x' }] }, 'files[0].path:'],
    ['the encoding', { ...SPEC, files: [{ path: '/work/a', content: 'x', encoding: `utf8${NUL}` }] }, 'files[0].encoding:'],
    ['an output path', { ...SPEC, outputs: [`/out/a${NUL}`] }, 'outputs[0]:'],
    ['an egress host', { ...SPEC, network: { egress: [`pypi.org${NUL}:443`] } }, 'network'],
    ['a secret name', { ...SPEC, secrets: [`API${NUL}KEY`] }, 'secrets[0]:'],
    ['a check id', { ...SPEC, checks: [{ id: `out${NUL}`, source: 'steps[0].exit_code', op: 'eq', value: 0, weight: 1 }] }, 'checks[0].id:'],
    ['a check source', { ...SPEC, checks: [{ id: 'out', source: `steps[0].exit_code${NUL}`, op: 'eq', value: 0, weight: 1 }] }, 'checks[0].source:'],
    ['a check op', { ...SPEC, checks: [{ id: 'out', source: 'steps[0].exit_code', op: `eq${NUL}`, value: 0, weight: 1 }] }, 'checks[0].op:'],
    ['the gate patch path', { ...gated('ok'), gate: { ...gated('ok').gate, patch: `/out/fix${NUL}.diff` } }, 'gate.patch:'],
    ['the gate patch step', { ...gated('ok'), gate: { ...gated('ok').gate, patchStep: `patch${NUL}` } }, 'gate.patchStep:'],
    ['a member name', { ...SPEC, [`na${NUL}me`]: 'x' }, 'unknown field'],
    ['claim.statement, a lone surrogate', { ...SPEC, claim: { statement: 'half \ud83d', checks } }, 'claim.statement: a statement may not contain a lone surrogate'],
  ])('E_INPUT for NUL in %s', async (_what, body, mentions) => {
    await expectRefused(() => submitJson(body), 400, 'E_INPUT', mentions);
  });

  it.each([
    ['an environment value', { env: { A: `x${NUL}y` } }, 'env.A: an environment value may not contain NUL'],
    ['a file', { files: [{ path: '/work/a.py', content: `print(1)${NUL}` }] }, 'files[0].content: file content may not contain NUL'],
    ['a file path', { files: [{ path: `/work/a${NUL}.py`, content: 'x' }] }, 'files[0].path:'],
    ['the image', { image: `cairn/sandbox:1${NUL}` }, 'image:'],
    ['a secret name', { secrets: [`API${NUL}KEY`] }, 'secrets[0]:'],
    ['an egress host', { network: { egress: [`pypi.org:443${NUL}`] } }, 'network'],
  ])('E_INPUT for a sandbox spec with NUL in %s', async (_what, body, mentions) => {
    await expectRefused(() => http(base, 'POST', '/v1/sandboxes', { key: keys.writer, body }), 400, 'E_INPUT', mentions);
  });

  it('E_INPUT for an exec with NUL in its workdir', async () => {
    await expectRefused(() => http(base, 'POST', '/v1/sandboxes/sbx_nosuchsandbox/exec', { key: keys.writer, body: { argv: ['id'], workdir: `/work/a${NUL}` } }), 400, 'E_INPUT', 'workdir');
  });

  it('E_INPUT for a cancel whose reason holds NUL (run.cancel_requested would carry it), and the live run is untouched', async () => {
    await expectRefused(() => http(base, 'POST', `/v1/runs/${liveRunId}/cancel`, { key: keys.writer, body: { reason: `stop${NUL}` } }), 400, 'E_INPUT', 'reason: a reason may not contain NUL (U+0000)');
    const run = await http(base, 'GET', `/v1/runs/${liveRunId}`, { key: keys.writer });
    expect(run.body).toMatchObject({ state: 'SUBMITTED', eventCount: 1 });
  });

  it('E_INPUT for an approval whose comment holds NUL (approval.granted would carry it)', async () => {
    await expectRefused(
      () => http(base, 'POST', `/v1/runs/${liveRunId}/approvals`, { key: keys.admin, body: { decision: 'approve', comment: `fine${NUL}` } }),
      400,
      'E_INPUT',
      'comment: a comment may not contain NUL (U+0000)',
    );
  });

  it.each([
    ['its description', { url: 'http://127.0.0.1:9/cairn', events: ['run.*'], description: `ops${NUL}` }, 'description: a description may not contain NUL (U+0000)'],
    ['its URL', { url: `http://127.0.0.1:9/cairn${NUL}`, events: ['run.*'] }, 'url: a URL may not contain NUL (U+0000)'],
    ['a URL that starts with one (which the URL parser would strip)', { url: `${NUL}http://127.0.0.1:9/cairn`, events: ['run.*'] }, 'url: a URL may not contain NUL'],
    ['an event pattern', { url: 'http://127.0.0.1:9/cairn', events: [`run.*${NUL}`] }, 'events[0]'],
  ])('E_INPUT for a webhook with NUL in %s, and none is registered', async (_what, body, mentions) => {
    await expectRefused(() => http(base, 'POST', '/v1/webhooks', { key: keys.admin, body }), 400, 'E_INPUT', mentions);
  });

  it('E_INPUT for a secret name with NUL', async () => {
    await expectRefused(() => http(base, 'PUT', '/v1/secrets/API%00KEY', { key: keys.admin, rawBody: 'a-long-enough-value', headers: { 'content-type': 'text/plain' } }), 400, 'E_INPUT', 'name');
  });
});

describe('the NUL that once made a run unreadable', () => {
  it('NUL in claim.statement is refused; the same claim over a base64 file of NUL bytes is accepted, projected and readable, with nothing poisoned', async () => {
    const claim = (statement: string) => ({ statement, checks: [{ id: 'exit', source: 'steps[0].exit_code', op: 'eq', value: 0 }] });
    await expectRefused(() => submitJson({ ...SPEC, name: 'a NUL in the claim', claim: claim(`it holds${NUL}`) }), 400, 'E_INPUT', 'claim.statement');

    const content = Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x00, 0x00, 0x00, 0x01, 0x00]).toString('base64');
    const before = await footprint();
    const accepted = await submitJson({ ...SPEC, name: 'NUL bytes, base64', files: [{ path: '/work/a.bin', content, encoding: 'base64' }], claim: claim('the file arrives whole') });
    expect(accepted.status, accepted.text).toBe(202);
    const runId = SubmitAcceptedSchema.parse(accepted.body).runId;
    await waitFor('the run projected', async () => (await http(base, 'GET', `/v1/runs/${runId}`, { key: keys.writer })).status === 200);
    expect((await http(base, 'GET', `/v1/runs/${runId}`, { key: keys.writer })).body).toMatchObject({ runId, name: 'NUL bytes, base64', state: 'SUBMITTED', eventCount: 1 });
    const events = await http(base, 'GET', `/v1/runs/${runId}/events`, { key: keys.writer });
    const submitted = (events.body as { items: { type: string; spec: { files: { content: string }[] } }[] }).items[0]!;
    expect(submitted.type).toBe('run.submitted');
    expect(Buffer.from(submitted.spec.files[0]!.content, 'base64').includes(0)).toBe(true);
    const after = await footprint();
    expect(after.poisoned).toBe(before.poisoned);
    expect(after.events).toBe(before.events + 1);
  });
});

describe('idempotency keys replayed', () => {
  it('the same key with another body is 422 E_IDEMPOTENCY_MISMATCH, and appends nothing', async () => {
    const idem = uniqueName('replay');
    const first = await submitJson({ ...SPEC, name: 'replayed' }, { 'idempotency-key': idem });
    expect(first.status, first.text).toBe(202);
    const runId = SubmitAcceptedSchema.parse(first.body).runId;
    await waitFor('the replayed run projected', async () => (await http(base, 'GET', `/v1/runs/${runId}`, { key: keys.writer })).status === 200);
    await expectRefused(
      () => submitJson({ ...SPEC, name: 'replayed', steps: [{ argv: ['rm', '-rf', '/work'] }] }, { 'idempotency-key': idem }),
      422,
      'E_IDEMPOTENCY_MISMATCH',
      undefined,
      true,
    );
    // The same spec with its members in another order is the same spec: the same run, nothing new.
    const before = await footprint();
    const reordered = await submitRaw(`{"steps":[{"argv":["echo","hello"]}],"name":"replayed"}`, { 'idempotency-key': idem });
    expect(reordered.status).toBe(202);
    expect(reordered.body).toEqual({ runId, state: 'SUBMITTED', duplicate: true });
    expect((await footprint()).evidence).toBe(before.evidence);
  });
});

describe('API keys: expired, forged, malformed, revoked, another tenant’s', () => {
  const forgedWithRealPrefix = () => `cairn_${keys.writerPrefix}_${'A'.repeat(43)}`;
  const cases: [string, () => Record<string, string>][] = [
    ['no key at all', () => ({})],
    ['a malformed key', () => ({ authorization: 'Bearer not-a-key' })],
    ['a forged key of the right shape', () => ({ authorization: `Bearer cairn_abcdefgh_${'Z'.repeat(43)}` })],
    ["a forged key with a real key's prefix", () => ({ authorization: `Bearer ${forgedWithRealPrefix()}` })],
    ['an expired key', () => ({ authorization: `Bearer ${keys.expired}` })],
    ['a revoked key', () => ({ authorization: `Bearer ${keys.revoked}` })],
    ['a look-alike of a real key (one Cyrillic letter)', () => ({ authorization: `Bearer ${headerBytes(keys.writer.replace(/[a-z]/, CYRILLIC_A))}` })],
    ['a real key under another scheme', () => ({ authorization: `Basic ${keys.writer}` })],
  ];

  it.each(cases)('401 E_UNAUTHORIZED to submit with %s, and nothing is published', async (_what, headers) => {
    await expectRefused(() => http(base, 'POST', '/v1/runs', { body: SPEC, headers: { 'idempotency-key': uniqueName('idem'), ...headers() } }), 401, 'E_UNAUTHORIZED');
  });

  it.each(cases)('401 E_UNAUTHORIZED to cancel a live run with %s, and the run is untouched', async (_what, headers) => {
    await expectRefused(() => http(base, 'POST', `/v1/runs/${liveRunId}/cancel`, { headers: headers() }), 401, 'E_UNAUTHORIZED');
  });

  it('401 for a real key passed in the query string instead of the header', async () => {
    await expectRefused(() => http(base, 'POST', `/v1/runs?api_key=${encodeURIComponent(keys.writer)}`, { body: SPEC, headers: { 'idempotency-key': uniqueName('idem') } }), 401, 'E_UNAUTHORIZED');
  });

  it("404 E_NOT_FOUND when another tenant's key cancels the run, and its chain is untouched", async () => {
    await expectRefused(() => http(base, 'POST', `/v1/runs/${liveRunId}/cancel`, { key: keys.other, body: { reason: 'not mine' } }), 404, 'E_NOT_FOUND', undefined, true);
    const run = await http(base, 'GET', `/v1/runs/${liveRunId}`, { key: keys.writer });
    expect(run.body).toMatchObject({ state: 'SUBMITTED', eventCount: 1 });
  });
});

describe('sandbox routes: every bad request refused before anything is asked of a sandbox', () => {
  // A well-formed id nobody created: the request is judged (400) before the sandbox is looked up (404).
  const SBX = 'sbx_nosuchsandbox';
  const sandboxJson = (body: unknown, headers: Record<string, string> = {}) => http(base, 'POST', '/v1/sandboxes', { key: keys.writer, body, headers });
  const sandboxRaw = (path: string, rawBody: string) => http(base, 'POST', path, { key: keys.writer, rawBody });
  const execJson = (body: unknown) => http(base, 'POST', `/v1/sandboxes/${SBX}/exec`, { key: keys.writer, body });
  const putBytes = (query: string, bytes: Uint8Array | string = 'x') =>
    http(base, 'PUT', `/v1/sandboxes/${SBX}/files${query}`, { key: keys.writer, rawBody: bytes, headers: { 'content-type': 'application/octet-stream' } });

  it.each([
    ['privileged', { privileged: true }, 'privileged: unknown field'],
    ['network host', { network: 'host' }, 'network:'],
    ['binds', { binds: ['/var/run/docker.sock:/var/run/docker.sock'] }, 'binds: unknown field'],
    ['a zero TTL', { ttlSeconds: 0 }, 'ttlSeconds:'],
    ['a TTL over a day', { ttlSeconds: 86_401 }, 'ttlSeconds:'],
    ['an image that is the Docker socket', { image: 'unix:///var/run/docker.sock' }, 'image:'],
    ['an input file over /etc/passwd', { files: [{ path: '/etc/passwd', content: 'root::0:0::/:/bin/sh' }] }, 'files[0].path:'],
    ['a Cyrillic letter in a secret name', { secrets: ['\u0410PI_KEY'] }, 'secrets[0]:'],
    ['an array', [1, 2], '(root)'],
  ])('E_INPUT for a sandbox spec with %s', async (_what, body, mentions) => {
    await expectRefused(() => sandboxJson(body), 400, 'E_INPUT', mentions);
  });

  it('E_INPUT for a sandbox spec with a duplicate key, and for an Idempotency-Key with a tab', async () => {
    await expectRefused(() => sandboxRaw('/v1/sandboxes', '{"image":"cairn/sandbox-busybox:1","image":"evil/image:1"}'), 400, 'E_INPUT', 'image: duplicate key');
    await expectRefused(() => sandboxJson({}, { 'idempotency-key': 'key\twith-tab' }), 400, 'E_INPUT', 'Idempotency-Key');
  });

  it.each([
    ['no argv', { env: { A: '1' } }, 'argv'],
    ['argv as a shell string', { argv: 'rm -rf /work' }, 'not a shell string'],
    ['an empty argv', { argv: [] }, 'argv'],
    ['a NUL byte in an argument', { argv: ['sh', '-c\u0000id'] }, 'argv[1]'],
    ['a NUL byte in an environment value', { argv: ['id'], env: { A: 'x\u0000y' } }, 'env.A'],
    ['a Cyrillic letter in an environment name', { argv: ['id'], env: { ['P\u0410TH']: '/tmp' } }, 'env'],
    ['workdir /proc/self/fd/3', { argv: ['id'], workdir: '/proc/self/fd/3' }, 'workdir'],
    ['workdir climbing out of /work', { argv: ['id'], workdir: '/work/../proc' }, 'workdir'],
    ['a shell flag', { argv: ['id'], shell: true }, 'shell: unknown field'],
    ['stdin over 512 KiB', { argv: ['cat'], stdin: 'x'.repeat(512 * 1024 + 1) }, 'stdin'],
    ['a timeout of zero', { argv: ['id'], timeoutSeconds: 0 }, 'timeoutSeconds'],
  ])('E_INPUT for an exec with %s', async (_what, body, mentions) => {
    await expectRefused(() => execJson(body), 400, 'E_INPUT', mentions);
  });

  it('E_INPUT for an exec with argv twice, or with no body at all', async () => {
    await expectRefused(() => sandboxRaw(`/v1/sandboxes/${SBX}/exec`, '{"argv":["true"],"argv":["rm","-rf","/work"]}'), 400, 'E_INPUT', 'argv: duplicate key');
    await expectRefused(() => http(base, 'POST', `/v1/sandboxes/${SBX}/exec`, { key: keys.writer }), 400, 'E_INPUT');
  });

  it.each([
    ['no path', ''],
    ['a relative path', '?path=work/a.txt'],
    ['a path climbing out with ..', '?path=/work/../etc/passwd'],
    ['a path outside /work, /out and /tmp', '?path=/etc/passwd'],
    ['the directory /work itself', '?path=/work'],
    ['a NUL byte in the path', '?path=/work/a%00b'],
    ['a newline in the path', '?path=/work/a%0Ab'],
    ['a mode that is not octal', '?path=/work/a&mode=rwx'],
    ['a mode past 07777', '?path=/work/a&mode=17777'],
    ['an unknown parameter', '?path=/work/a&owner=root'],
  ])('E_INPUT for a file written with %s', async (_what, query) => {
    await expectRefused(() => putBytes(query), 400, 'E_INPUT');
  });

  it.each([
    ['a path climbing out with ..', '?path=/tmp/../proc/self/environ'],
    ['a path at the Docker socket', '?path=/var/run/docker.sock'],
  ])('E_INPUT for a file read with %s', async (_what, query) => {
    await expectRefused(() => http(base, 'GET', `/v1/sandboxes/${SBX}/files${query}`, { key: keys.writer }), 400, 'E_INPUT', 'path');
  });

  it('413 E_TOO_LARGE for a file over 16 MiB; E_INPUT for a file sent as JSON, and for octet-stream anywhere else', async () => {
    await expectRefused(() => putBytes('?path=/work/big.bin', new Uint8Array(16 * 1024 * 1024 + 1)), 413, 'E_TOO_LARGE');
    await expectRefused(() => http(base, 'PUT', `/v1/sandboxes/${SBX}/files?path=/work/a`, { key: keys.writer, body: { content: 'x' } }), 400, 'E_INPUT', 'application/octet-stream');
    await expectRefused(
      () => http(base, 'POST', '/v1/runs', { key: keys.writer, rawBody: JSON.stringify(SPEC), headers: { 'idempotency-key': uniqueName('idem'), 'content-type': 'application/octet-stream' } }),
      400,
      'E_INPUT',
      'application/octet-stream',
    );
    // Past the gateway's own 1 MiB, octet-stream elsewhere is refused for its size before it is read.
    await expectRefused(
      () => http(base, 'POST', `/v1/sandboxes/${SBX}/exec`, { key: keys.writer, rawBody: new Uint8Array(2 * 1024 * 1024), headers: { 'content-type': 'application/octet-stream' } }),
      413,
      'E_TOO_LARGE',
    );
  });

  const lookAlike = `sbx_${CYRILLIC_A}bc123`;
  it.each([
    ['GET', `/v1/sandboxes/${encodeURIComponent(lookAlike)}`],
    ['DELETE', `/v1/sandboxes/${encodeURIComponent(lookAlike)}`],
    ['GET', `/v1/sandboxes/${encodeURIComponent(lookAlike)}/events`],
    ['GET', `/v1/sandboxes/${encodeURIComponent(lookAlike)}/bundle`],
    ['GET', `/v1/sandboxes/${encodeURIComponent(lookAlike)}/files?path=/work/a`],
    ['GET', '/v1/sandboxes/sbx_abc%0Adef'],
    ['GET', '/v1/sandboxes/run_abcdef'],
    ['DELETE', '/v1/sandboxes/sbx_abc%2F..%2F..%2Fv1%2Fruns'],
  ] as const)('E_INPUT for a sandbox id with a look-alike or control character, or of a run: %s %s', async (method, path) => {
    await expectRefused(() => http(base, method, path, { key: keys.writer }), 400, 'E_INPUT', 'id');
  });

  it('E_INPUT for a look-alike id on exec and on a file write, before their bodies are judged', async () => {
    await expectRefused(() => http(base, 'POST', `/v1/sandboxes/${encodeURIComponent(lookAlike)}/exec`, { key: keys.writer, body: { argv: ['id'] } }), 400, 'E_INPUT', 'id');
    await expectRefused(
      () => http(base, 'PUT', `/v1/sandboxes/${encodeURIComponent(lookAlike)}/files?path=/work/a`, { key: keys.writer, rawBody: 'x', headers: { 'content-type': 'application/octet-stream' } }),
      400,
      'E_INPUT',
      'id',
    );
  });

  it.each([
    ['a forged cursor', '/v1/sandboxes?cursor=bm90IGEgY3Vyc29y', 'cursor'],
    ['a state sandboxes do not have', '/v1/sandboxes?state=SEALED', 'state'],
    ['a limit of zero', '/v1/sandboxes?limit=0', 'limit'],
  ])('E_INPUT for a list with %s', async (_what, path, mentions) => {
    await expectRefused(() => http(base, 'GET', path, { key: keys.writer }), 400, 'E_INPUT', mentions);
  });

  it('404 E_NOT_FOUND for a well-formed sandbox nobody created, on every route', async () => {
    for (const [method, path] of [
      ['GET', `/v1/sandboxes/${SBX}`],
      ['DELETE', `/v1/sandboxes/${SBX}`],
      ['GET', `/v1/sandboxes/${SBX}/events`],
      ['GET', `/v1/sandboxes/${SBX}/bundle`],
      ['GET', `/v1/sandboxes/${SBX}/files?path=/work/a`],
    ] as const) {
      await expectRefused(() => http(base, method, path, { key: keys.writer }), 404, 'E_NOT_FOUND');
    }
    await expectRefused(() => execJson({ argv: ['id'] }), 404, 'E_NOT_FOUND');
    await expectRefused(() => putBytes('?path=/work/a'), 404, 'E_NOT_FOUND');
  });

  it.each([
    ['no key at all', {}],
    ['a malformed key', { authorization: 'Bearer not-a-key' }],
  ])('401 E_UNAUTHORIZED to create a sandbox with %s, and nothing is published', async (_what, headers) => {
    await expectRefused(() => http(base, 'POST', '/v1/sandboxes', { body: {}, headers }), 401, 'E_UNAUTHORIZED');
  });
});
