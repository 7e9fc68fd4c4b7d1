import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isolatedNames } from '@cairn/config';
import { formatReport, scenarioClock } from '@cairn/fault-testing';
import { testNatsUrl } from '@cairn/testing';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultScenario, sealed, sleep, TWO_STEPS } from './fault-stack.harness.js';
import { isRunning, TestStack } from './stack.harness.js';

/*
 * The fault matrix's first row (issue 18, docs/testing.md "The fault matrix"): `kill -9` of each
 * service in the middle of a run on one isolated stack (`cairn up`), the service restarted by
 * `cairn up`, and then the fault suite's checker judging the whole log after each crash — L, D, C,
 * T, R (the live warm pool set aside) and P. Every run but the runtime's ends SEALED with the same
 * receipts a run without a crash records; the runtime's ends FAILED E_WORKER_LOST (no `retries`),
 * its sandbox reaped by the restarted runtime. A run submitted while intake, policy or the
 * scheduler is down waits and goes on once it is back; a webhook registered for `run.sealed` is
 * delivered although the webhooks service died in the middle of its run.
 */

let stack: TestStack;
let nc: NatsConnection;
let scenario: FaultScenario;
let receiver: Server;
let receiverUrl = '';
const delivered: { type: string; chainId: string; eventId: string }[] = [];
const clock = scenarioClock();
/** The ack wait of the kernel, grader and projector in this stack: what the slow consumers are stopped past. */
const SLOW_ACK_WAIT_MS = 8_000;
/** The receipt types, sorted, of a run with no crash: what every crashed run but the runtime's must record. */
let reference: string[] = [];
/** The run with no crash: sealed SUPPORTS before any fault. */
let referenceRun = '';

/** SIGKILL, as a crash would; resolves once the process is gone. */
async function crash(service: string): Promise<void> {
  const pid = (await stack.stackFile()).services[service]!.pid;
  process.kill(pid, 'SIGKILL');
  await expect.poll(() => isRunning(pid), { timeout: 5_000 }).toBe(false);
}

async function restart(service: string): Promise<void> {
  const up = await stack.up();
  expect(up).toMatchObject({ outcome: 'restarted', restarted: [service] });
}

/** A crashed run's outcome: sealed as a run without a crash is, with the same receipts. */
async function expectLikeReference(runId: string): Promise<void> {
  await scenario.expectSealedSupports(runId);
  expect((await stack.types(runId)).sort()).toEqual(reference);
}

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string; type: string; chain: string };
      delivered.push({ type: event.type, chainId: event.chain, eventId: event.id });
      res.statusCode = 200;
      res.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/sealed`;
  stack = await TestStack.create('crash-fault', {
    CAIRN_LEASE_TTL_MS: '4000',
    CAIRN_LEASE_RENEW_MS: '1000',
    CAIRN_HEARTBEAT_MS: '500',
    // A restarted runtime records the reap of a crashed run's sandbox before the grader seals without it.
    CAIRN_GRADER_TEARDOWN_GRACE_MS: '20000',
    // A submit waits this long for intake's reply: longer than `cairn up` takes to bring intake back.
    CAIRN_GATEWAY_COMMAND_TIMEOUT_MS: '45000',
    CAIRN_WEBHOOKS_ALLOW_PRIVATE: '1',
    CAIRN_WEBHOOKS_RETRY_BASE_MS: '300',
    CAIRN_WEBHOOKS_RETRY_MAX_MS: '600',
    // The slow consumers below are stopped past this: 8 s, not the 30 s (10 s for the projector) of a default stack.
    CAIRN_KERNEL_ACK_WAIT_MS: String(SLOW_ACK_WAIT_MS),
    CAIRN_GRADER_ACK_WAIT_MS: String(SLOW_ACK_WAIT_MS),
    CAIRN_PROJECTOR_ACK_WAIT_MS: String(SLOW_ACK_WAIT_MS),
  });
  expect((await stack.up()).outcome).toBe('started');
  nc = await connect({ servers: (stack.env.CAIRN_NATS_URL ?? testNatsUrl()).split(',') });
  scenario = new FaultScenario(stack, nc, clock);
  const hook = await stack.api('/v1/webhooks', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: receiverUrl, events: ['run.sealed'] }) });
  expect(hook.status, await hook.clone().text()).toBe(201);
  const runId = await scenario.submit('no crash');
  await stack.waitForRun(runId, sealed, 60_000);
  reference = (await stack.types(runId)).sort();
  referenceRun = runId;
}, 180_000);

afterAll(async () => {
  await nc?.close();
  await stack?.dispose();
  await new Promise<void>((resolve) => (receiver === undefined ? resolve() : receiver.close(() => resolve())));
});

describe('fault: kill -9 of each service mid-run, restarted by cairn up, every invariant checked after', () => {
  it('with no crash: the reference run seals and every invariant holds', async () => {
    expect(reference).toContain('run.sealed');
    await scenario.expectInvariants();
  });

  // A run in flight needs nothing more of intake; one submitted while it is down waits in the command stream.
  for (const service of ['intake', 'policy', 'scheduler'] as const) {
    it(`${service}: the run in flight seals; one submitted while it is down waits and goes on once it is back`, async () => {
      const inFlight = await scenario.submit(`${service} crash, in flight`);
      await scenario.waitForType(inFlight, 'step.started');
      await crash(service);
      // Intake down: the gateway's submit waits for intake's reply, so it goes in beside the restart.
      const late = service === 'intake' ? null : await scenario.submit(`${service} crash, submitted while down`);
      if (late !== null) {
        await sleep(1000);
        const types = await stack.types(late);
        expect(types.includes(service === 'policy' ? 'policy.decided' : 'run.scheduled'), types.join(', ')).toBe(false);
      }
      const lateWhileRestarting = service === 'intake' ? scenario.submit('intake crash, submitted while down') : null;
      await restart(service);
      await expectLikeReference(inFlight);
      await expectLikeReference(late ?? (await lateWhileRestarting!));
      await scenario.expectInvariants();
    });
  }

  it('runtime: the run ends FAILED E_WORKER_LOST, its sandbox is reaped by the runtime restarted, nothing runs twice', async () => {
    const runId = await scenario.submit('runtime crash', [{ argv: ['sleep', '20'] }, { argv: ['echo', 'done'] }]);
    await scenario.waitForType(runId, 'step.started');
    await crash('runtime');
    expect(await stack.containers(runId)).toHaveLength(1);
    await restart('runtime');
    const run = await stack.waitForRun(runId, sealed, 60_000);
    expect(run).toMatchObject({ state: 'FAILED', errorCode: 'E_WORKER_LOST' });
    const types = await stack.types(runId);
    expect(types.filter((t) => t === 'step.completed')).toHaveLength(0);
    expect(types).toContain('sandbox.destroyed');
    await scenario.expectInvariants();
  });

  it("runtime: killed between the engine creating a run's container and the runtime recording it, the container is reaped and not counted twice", async () => {
    // Caps no warm-pool profile has: the container is created for this run, labelled with its chain.
    const { createDockerClient } = await import('@cairn/sandbox-docker');
    const docker = createDockerClient();
    const events = await docker.getEvents({ filters: { type: ['container'], event: ['create'], label: [`io.cairn.worker=${stack.names.workerId}`] } });
    const target: { runId: string | null } = { runId: null };
    const pid = (await stack.stackFile()).services.runtime!.pid;
    const killed = new Promise<boolean>((resolve) => {
      let text = '';
      events.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n')) {
          const line = text.slice(0, nl);
          text = text.slice(nl + 1);
          const chain = (JSON.parse(line) as { Actor?: { Attributes?: Record<string, string> } }).Actor?.Attributes?.['io.cairn.chain'];
          if (chain !== undefined && chain.startsWith('run_')) {
            process.kill(pid, 'SIGKILL');
            target.runId = chain;
            resolve(true);
          }
        }
      });
    });
    const runId = await scenario.submit('runtime crash at create', TWO_STEPS, { memoryMiB: 40 });
    expect(await Promise.race([killed, sleep(30_000).then(() => false)])).toBe(true);
    (events as unknown as { destroy(): void }).destroy();
    expect(target.runId).toBe(runId);
    await expect.poll(() => isRunning(pid), { timeout: 5_000 }).toBe(false);
    const recorded = (await stack.types(runId)).includes('sandbox.created');
    console.log(`killed at the engine's create event: sandbox.created ${recorded ? 'was already' : 'was not yet'} on the chain`);
    await restart('runtime');
    const run = await stack.waitForRun(runId, sealed, 60_000);
    expect(run).toMatchObject({ state: 'FAILED', errorCode: 'E_WORKER_LOST' });
    expect(await stack.containers(runId)).toEqual([]);
    await scenario.expectInvariants();
  });

  // Their work comes once the steps have ended: it arrives while they are down, and is done once when they are back.
  for (const service of ['kernel', 'verifier', 'grader', 'projector'] as const) {
    it(`${service}: the work that arrives while it is down is done once, when it is back`, async () => {
      const runId = await scenario.submit(`${service} crash`);
      await scenario.waitForType(runId, 'step.started');
      await crash(service);
      if (service !== 'projector') {
        await scenario.waitForType(runId, 'sandbox.destroyed');
        await sleep(500);
        expect((await stack.getRun(runId)).sealed).toBe(false);
      }
      await restart(service);
      await expectLikeReference(runId);
      await scenario.expectInvariants();
    });
  }

  it('gateway: the run goes on without it; once it is back the run reads sealed', async () => {
    const runId = await scenario.submit('gateway crash');
    await scenario.waitForType(runId, 'step.started');
    await crash('gateway');
    await sleep(3000);
    await restart('gateway');
    await expectLikeReference(runId);
    await scenario.expectInvariants();
  });

  it('webhooks: a run sealed while it is down is delivered once it is back', async () => {
    const runId = await scenario.submit('webhooks crash');
    await scenario.waitForType(runId, 'step.started');
    await crash('webhooks');
    await stack.waitForRun(runId, sealed, 60_000);
    await restart('webhooks');
    await expectLikeReference(runId);
    await expect.poll(() => delivered.filter((d) => d.chainId === runId && d.type === 'run.sealed').length, { timeout: 30_000 }).toBeGreaterThan(0);
    // Every sealed run so far was delivered, and a repeat (at-least-once) carries the same event id.
    for (const chainId of scenario.acknowledged) {
      const events = delivered.filter((d) => d.chainId === chainId && d.type === 'run.sealed');
      expect(events.length, `run.sealed of ${chainId} delivered`).toBeGreaterThan(0);
      expect(new Set(events.map((e) => e.eventId)).size).toBe(1);
    }
    await scenario.expectInvariants();
  });
});

describe('fault: a runtime paused past the lease of a sandbox session', () => {
  it('SIGSTOPped mid-exec until the scheduler fails the session E_WORKER_LOST, then SIGCONTed: the exec is never recorded as completed after the failure, the sandbox goes', async () => {
    const created = await stack.api('/v1/sandboxes', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ image: 'cairn/sandbox-busybox:1', ttlSeconds: 300, network: 'none' }) });
    const sandbox = (await created.json()) as { id: string };
    expect(created.status, JSON.stringify(sandbox)).toBe(201);
    scenario.acknowledged.push(sandbox.id);
    const types = async () => ((await (await stack.api(`/v1/sandboxes/${sandbox.id}/events?after=0&limit=1000`)).json()) as { items: { type: string; actor: string; error_code?: string }[] }).items;
    const exec = stack.api(`/v1/sandboxes/${sandbox.id}/exec`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ argv: ['sh', '-c', 'sleep 6; echo late'] }) });
    await expect.poll(async () => (await types()).some((r) => r.type === 'sandbox.exec.started'), { timeout: 15_000 }).toBe(true);
    const pid = (await stack.stackFile()).services.runtime!.pid;
    process.kill(pid, 'SIGSTOP');
    try {
      await expect.poll(async () => (await types()).find((r) => r.type === 'run.failed'), { timeout: 30_000 }).toMatchObject({ actor: 'scheduler', error_code: 'E_WORKER_LOST' });
      // Past the exec's end too: its result waits in the paused process.
      await sleep(6000);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const answer = await exec;
    const answered = (await answer.json()) as { code?: string };
    // Its result is not recorded: the session's append, guarded on the head it last saw, finds the failure.
    expect({ status: answer.status, code: answered.code }).toEqual({ status: 409, code: 'E_CONFLICT' });
    await expect.poll(async () => (await types()).some((r) => r.type === 'run.sealed'), { timeout: 30_000 }).toBe(true);
    const chain = await types();
    const failedAt = chain.findIndex((r) => r.type === 'run.failed');
    const after = chain.slice(failedAt + 1).map((r) => `${r.type}:${r.actor}`);
    expect(after.filter((t) => !t.startsWith('sandbox.destroyed:') && !t.startsWith('run.sealed:'))).toEqual([]);
    expect(chain.filter((r) => r.type === 'sandbox.exec.completed')).toHaveLength(0);
    await expect.poll(() => stack.containers(sandbox.id), { timeout: 20_000 }).toEqual([]);
    await scenario.expectInvariants();
  });
});

/** Chains broken on purpose so far (the forgery, the poison messages): C names them, and only them. */
const broken = new Set<string>();

/** Every invariant holds, but C may name the chains broken on purpose before (and only them). */
async function expectInvariantsBesideBroken(): Promise<void> {
  const report = await scenario.check();
  console.log(formatReport(report));
  expect(report.invariants.C.checked).toBe(true);
  for (const finding of report.invariants.C.findings) expect([...broken].some((id) => finding.includes(id)), finding).toBe(true);
  for (const invariant of ['L', 'D', 'T', 'R', 'P'] as const) expect(report.invariants[invariant], formatReport(report)).toMatchObject({ checked: true, ok: true });
}

/** Every service's log lines that name the chain, for a failure message. */
async function linesAbout(chainId: string): Promise<string> {
  return (await stack.logs(1_000_000)).split('\n').filter((line) => line.startsWith('---') || line.includes(chainId)).join('\n').slice(-20_000);
}

/** A run's receipts as the gateway serves them. */
async function receiptsOf(runId: string): Promise<Record<string, unknown>[]> {
  return ((await (await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`)).json()) as { items: Record<string, unknown>[] }).items;
}

describe('fault: a receipt forged into the stream mid-run, by a client that may publish to it', () => {
  it('is detected and never trusted: the run ends FAILED E_CHAIN_BROKEN, sealed, and the checker names the chain under C', async () => {
    const runId = await scenario.submit('forged receipt', [{ argv: ['sleep', '3'] }, { argv: ['echo', 'done'] }]);
    await scenario.waitForType(runId, 'step.started');
    const events = (await (await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`)).json()) as { items: Record<string, unknown>[] };
    const started = events.items.find((r) => r.type === 'step.started')!;
    // A step.completed that meets its contract and chains to the head by prev_hash, with a hash
    // that is not its own: what a client without the runtime's code could publish.
    const { env_names: _env, workdir: _workdir, ...envelope } = started;
    const empty = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
    const forgedSeq = Number(started.seq) + 1;
    const forged = {
      ...envelope,
      type: 'step.completed',
      seq: forgedSeq,
      prev_hash: started.hash,
      hash: 'f'.repeat(64),
      exit_code: 0,
      signal: null,
      stdout_sha256: empty,
      stderr_sha256: empty,
      stdout_bytes: 0,
      stderr_bytes: 0,
      output_truncated: false,
      duration_ms: 1,
      limits_hit: [],
      redactions: [],
      artifact_hashes: {},
    };
    nc.publish(`${isolatedNames(stack.stackId).CAIRN_EVIDENCE_SUBJECT_PREFIX}.${runId}.step.completed`, JSON.stringify(forged));
    await nc.flush();

    const run = await stack.waitForRun(runId, sealed, 60_000);
    expect(run).toMatchObject({ state: 'FAILED', errorCode: 'E_CHAIN_BROKEN', sealed: true });
    expect(await stack.types(runId)).toContain('alert.raised');
    // The runtime noticed (a head it did not write, whose hash does not recompute) and stopped the
    // run itself: its failure and alert are its own, and nothing of the run came after the forgery.
    const after = (await receiptsOf(runId)).filter((r) => Number(r.seq) > forgedSeq);
    expect(after.map((r) => `${String(r.type)}:${String(r.actor)}`)).toEqual(['sandbox.destroyed:runtime', 'alert.raised:runtime', 'run.failed:runtime', 'run.sealed:grader']);
    expect(after.find((r) => r.type === 'run.failed')).toMatchObject({ error_code: 'E_CHAIN_BROKEN' });
    expect(String(after.find((r) => r.type === 'run.failed')!.message)).toContain(`seq ${forgedSeq} hash_mismatch`);
    expect(await stack.containers(runId)).toEqual([]);
    const verified = await stack.cairn(['verify', runId, '--json']);
    expect(verified.code).not.toBe(0);
    expect(verified.stdout + verified.stderr).toContain('E_CHAIN_BROKEN');

    const report = await scenario.check();
    console.log(formatReport(report));
    expect(report.invariants.C.ok).toBe(false);
    expect(report.invariants.C.findings.length).toBeGreaterThan(0);
    for (const finding of report.invariants.C.findings) expect(finding).toContain(runId);
    broken.add(runId);
    // The forged step.completed beside the runtime's own is the only double the checker may see.
    for (const finding of report.invariants.D.findings) expect(finding).toContain(runId);
    for (const invariant of ['L', 'T', 'R', 'P'] as const) expect(report.invariants[invariant], formatReport(report)).toMatchObject({ checked: true, ok: true });
  });
});

describe('fault: a poison message — not a receipt at all — on a running run\'s chain, by a client that may publish to it', () => {
  const poisons = [
    { name: 'bad JSON', body: '{"type":"step.completed", not json' },
    { name: 'JSON that fails the receipt envelope', body: JSON.stringify({ type: 'step.completed', seq: 'three', run_id: 'nobody' }) },
  ];
  for (const poison of poisons) {
    it(`${poison.name}: the run ends FAILED E_CHAIN_BROKEN on the record, sealed, its sandbox reaped, no consumer spins, and cairn verify says where`, async () => {
      const runId = await scenario.submit(`poison: ${poison.name}`, [{ argv: ['sleep', '3'] }, { argv: ['echo', 'done'] }]);
      await scenario.waitForType(runId, 'step.started');
      const before = await receiptsOf(runId);
      const lastSeq = Math.max(...before.map((r) => Number(r.seq)));
      const prefix = isolatedNames(stack.stackId).CAIRN_EVIDENCE_SUBJECT_PREFIX;
      const ack = await (await import('@nats-io/jetstream')).jetstream(nc).publish(`${prefix}.${runId}.step.completed`, poison.body);
      expect(ack.stream).toBe(stack.names.evidenceStream);

      const run = await stack.waitForRun(runId, sealed, 60_000);
      expect(run).toMatchObject({ state: 'FAILED', errorCode: 'E_CHAIN_BROKEN', sealed: true });
      const receipts = await receiptsOf(runId);
      // The failing receipts chain onto the last receipt before the poison message; nothing ran after it.
      const after = receipts.filter((r) => Number(r.seq) > lastSeq);
      expect(after.map((r) => String(r.type)), await linesAbout(runId)).toEqual(['alert.raised', 'run.failed', 'sandbox.destroyed', 'run.sealed']);
      expect(after[0]!.prev_hash).toBe(before.find((r) => Number(r.seq) === lastSeq)!.hash);
      for (const r of after.slice(0, 2)) {
        expect(r).toMatchObject({ error_code: 'E_CHAIN_BROKEN' });
        expect(String(r.message)).toContain(`stream seq ${ack.seq} on ${prefix}.${runId}.step.completed, after seq ${lastSeq}, is not a receipt`);
      }
      expect(receipts.filter((r) => r.type === 'step.started')).toHaveLength(1);
      expect(receipts.filter((r) => r.type === 'step.completed')).toHaveLength(0);
      expect(await stack.containers(runId)).toEqual([]);

      const verified = await stack.cairn(['verify', runId, '--json']);
      expect(verified.code).toBe(1);
      expect(verified.stdout + verified.stderr).toContain('E_CHAIN_BROKEN');
      expect(verified.stdout + verified.stderr).toContain(`stream seq ${ack.seq}`);

      // No consumer loops on it: a while later no service has logged about it again.
      const logged = async () => (await stack.logs(1_000_000)).split('\n').filter((line) => line.includes(runId) && /"level":"(error|fatal)"/.test(line)).length;
      const settled = await logged();
      await sleep(4000);
      expect(await logged()).toBe(settled);

      const report = await scenario.check();
      console.log(formatReport(report));
      // The poison message is on the chain's subjects: the checker names this chain, and only it, under C.
      expect(report.invariants.C.ok).toBe(false);
      broken.add(runId);
      for (const finding of report.invariants.C.findings) expect([...broken].some((id) => finding.includes(id)), finding).toBe(true);
      expect(report.invariants.C.findings.some((f) => f.includes(runId))).toBe(true);
      for (const invariant of ['L', 'D', 'T', 'R', 'P'] as const) expect(report.invariants[invariant], formatReport(report)).toMatchObject({ checked: true, ok: true });
    });
  }
});


describe('fault: rows edited in PostgreSQL, by someone who may write its tables', () => {
  it('are detected and never trusted: cairn projections check names them, the proof bundle fails, a rebuild puts the log back', async () => {
    const runId = referenceRun;
    const db = new pg.Client({ connectionString: stack.database.url });
    await db.connect();
    let editedSeq = 0;
    try {
      await db.query(`UPDATE runs SET state = 'FAILED', error_code = 'E_TIMEOUT', verdict = NULL WHERE run_id = $1`, [runId]);
      // evidence_events refuses UPDATE by trigger: only its owner, switching the trigger off, gets past.
      await db.query('ALTER TABLE evidence_events DISABLE TRIGGER USER');
      const edited = await db.query<{ stream_seq: string }>(
        `UPDATE evidence_events SET receipt = jsonb_set(receipt::jsonb, '{exit_code}', '7')::json
          WHERE chain_id = $1 AND type = 'step.completed' AND receipt->>'step_index' = '0' RETURNING stream_seq`,
        [runId],
      );
      await db.query('ALTER TABLE evidence_events ENABLE TRIGGER USER');
      expect(edited.rows).toHaveLength(1);
      editedSeq = Number(edited.rows[0]!.stream_seq);
    } finally {
      await db.end();
    }

    // Found and named, column by column, from the log's own fold; the check changes nothing.
    const check = await stack.cairn(['projections', 'check', '--json']);
    expect(check.code, check.stdout + check.stderr).toBe(1);
    const failure = JSON.parse(check.stdout) as { error: { code: string; details: { driftCount: number; drift: { table: string; key: string; kind: string; columns: string[] }[] } } };
    expect(failure.error.code).toBe('E_CONFLICT');
    expect(failure.error.details.driftCount).toBe(2);
    expect(failure.error.details.drift).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ table: 'runs', key: runId, kind: 'edited', columns: ['error_code', 'state', 'verdict'] }),
        expect.objectContaining({ table: 'evidence_events', key: String(editedSeq), kind: 'edited', columns: ['receipt'] }),
      ]),
    );
    // Never trusted: the proof bundle is checked by recomputing every hash, so the edited receipt
    // fails it where it is; the chain exported from the log itself still verifies.
    const bundle = await stack.cairn(['verify', runId, '--json']);
    expect(bundle.code).toBe(1);
    expect(bundle.stdout).toContain('E_CHAIN_BROKEN');
    const report = await scenario.check();
    console.log(formatReport(report));
    expect(report.invariants.P.ok).toBe(false);
    expect(report.invariants.P.findings.some((finding) => finding.includes(runId))).toBe(true);

    // The log is the truth: a rebuild puts it back, while the stack runs.
    const rebuilt = await stack.cairn(['projections', 'rebuild']);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect((await stack.cairn(['projections', 'check'])).code).toBe(0);
    expect(await stack.getRun(runId)).toMatchObject({ state: 'SEALED', verdict: 'SUPPORTS', errorCode: null });
    await stack.expectCleanAndVerifiable(runId);
    const after = await scenario.check();
    expect(after.invariants.P, formatReport(after)).toMatchObject({ checked: true, ok: true });
  });
});

describe('fault: slow consumers — the kernel, grader and projector stopped past their ack wait, then resumed', () => {
  it('what each held past its ack wait is delivered again as it resumes, racing the first delivery, and is acted on once: the run seals, reads catch up, every invariant holds', async () => {
    const { jetstreamManager } = await import('@nats-io/jetstream');
    const jsm = await jetstreamManager(nc);
    // The verifier is left running: it has nothing to do until the stopped kernel's facts.
    const slow = ['kernel', 'grader', 'projector'] as const;
    const services = (await stack.stackFile()).services;
    const pids = slow.map((service) => services[service]!.pid);
    const stream = stack.names.evidenceStream;
    const prefix = isolatedNames(stack.stackId).CAIRN_EVIDENCE_SUBJECT_PREFIX;
    const onLog = (runId: string, type: string) =>
      jsm.streams.getMessage(stream, { last_by_subj: `${prefix}.${runId}.${type}` }).then(
        (message) => message !== null,
        () => false,
      );
    /**
     * A consumer's deliveries and the messages its filter matches: the consumer sequence counts
     * every delivery, a redelivery too, so what it grows by beyond the messages is redeliveries.
     */
    const deliveries = async (service: string) => {
      const info = await jsm.consumers.info(stream, `cairn-${service}`);
      const filters = info.config.filter_subjects ?? (info.config.filter_subject === undefined ? [`${prefix}.>`] : [info.config.filter_subject]);
      let matching = 0;
      for (const filter of filters) {
        const counts = (await jsm.streams.info(stream, { subjects_filter: filter })).state.subjects ?? {};
        matching += Object.values(counts).reduce((sum, n) => sum + n, 0);
      }
      return { delivered: info.delivered.consumer_seq, matching, acked: info.ack_floor.consumer_seq };
    };
    const ackWaitMs = SLOW_ACK_WAIT_MS; // this stack's, for the three

    const before = Object.fromEntries(await Promise.all(slow.map(async (service) => [service, await deliveries(service)] as const)));
    for (const pid of pids) process.kill(pid, 'SIGSTOP');
    let runId = '';
    try {
      runId = await scenario.submit('slow consumers');
      // The runtime's part goes on: what follows waits in the stopped services' consumers.
      await expect.poll(() => onLog(runId, 'run.executed'), { timeout: 30_000, interval: 200 }).toBe(true);
      await sleep(ackWaitMs + 5_000);
      expect(await onLog(runId, 'kernel.facts')).toBe(false);
    } finally {
      for (const pid of pids) process.kill(pid, 'SIGCONT');
    }

    await expectLikeReference(runId);
    for (const pid of pids) expect(isRunning(pid)).toBe(true);
    const redelivered: Record<string, number> = {};
    for (const service of slow) {
      const after = await deliveries(service);
      expect(after.acked, `${service} acknowledged all it was delivered`).toBe(after.delivered);
      redelivered[service] = after.delivered - before[service]!.delivered - (after.matching - before[service]!.matching);
    }
    console.log(`deliveries again, by consumer: ${JSON.stringify(redelivered)}`);
    // What a stopped service held past its ack wait was delivered again as it resumed. A consumer
    // whose pull request ran out while it was stopped held nothing (here the kernel, now and then):
    // it is delivered only once, late. The projector, sent receipts from the first instant, always holds some.
    expect(Object.values(redelivered).reduce((sum, n) => sum + n, 0)).toBeGreaterThan(0);
    await expectInvariantsBesideBroken();
  }, 120_000);
});

describe('fault: duplicate delivery of every receipt type, to every service', () => {
  it("a sealed run's whole chain delivered again to every durable consumer of the stack changes nothing: no receipt, no container, no webhook, and the invariants hold", async () => {
    const { DeliverPolicy, jetstreamManager } = await import('@nats-io/jetstream');
    const jsm = await jetstreamManager(nc);
    const stream = stack.names.evidenceStream;
    const prefix = isolatedNames(stack.stackId).CAIRN_EVIDENCE_SUBJECT_PREFIX;
    const runId = await scenario.submit('delivered twice');
    await scenario.expectSealedSupports(runId);
    await expect.poll(() => delivered.filter((d) => d.chainId === runId).length, { timeout: 30_000 }).toBe(1);
    const before = await stack.types(runId);
    const firstSeq = (await jsm.streams.getMessage(stream, { last_by_subj: `${prefix}.${runId}.run.submitted` }))!.seq;

    // Every service's durable consumer of the evidence stream: `cairn-<service>`, the runtime's
    // `cairn-runtime-<worker>`, the webhooks service's `cairn-webhooks-<digest>` (ADR 0024).
    const durables = [];
    for await (const info of jsm.consumers.list(stream)) if (info.config.durable_name?.startsWith('cairn-') === true) durables.push(info.config);
    const serviceOf = (durable: string) => durable.replace(/^cairn-/, '').replace(/^(runtime|webhooks)-.*$/, '$1');
    const services = [...new Set(durables.map((config) => serviceOf(config.durable_name!)))].sort();
    expect(services).toEqual(['grader', 'kernel', 'policy', 'projector', 'runtime', 'scheduler', 'verifier', 'webhooks']);

    // Stopped, each durable is made again at the run's first receipt, so everything from there is
    // delivered to it a second time once its service is back. Not the projector's: it keeps its
    // position in PostgreSQL and refuses a consumer that starts anywhere but the first message (its
    // deliveries again are the slow-consumers scenario's).
    for (const service of services) await crash(service);
    const again = durables.filter((config) => config.durable_name !== 'cairn-projector');
    for (const config of again) {
      await jsm.consumers.delete(stream, config.durable_name!);
      const { opt_start_time: _time, ...rest } = config;
      await jsm.consumers.add(stream, { ...rest, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: firstSeq });
    }
    const up = await stack.up();
    expect(up).toMatchObject({ outcome: 'restarted' });
    for (const config of again) {
      await expect
        .poll(
          async () => {
            const info = await jsm.consumers.info(stream, config.durable_name!);
            return info.num_pending + info.num_ack_pending;
          },
          { timeout: 60_000, interval: 250 },
        )
        .toBe(0);
      // Delivered again indeed: the consumer is new, so every delivery it counts is of a receipt its
      // service had taken before (nothing new has been submitted yet).
      expect((await jsm.consumers.info(stream, config.durable_name!)).delivered.consumer_seq, config.durable_name).toBeGreaterThan(0);
    }
    await sleep(2_000);
    expect(await stack.types(runId)).toEqual(before);
    expect(delivered.filter((d) => d.chainId === runId)).toHaveLength(1);
    expect(await stack.containers(runId)).toEqual([]);
    await scenario.expectSealedSupports(await scenario.submit('after every receipt was delivered twice'));
    await expectInvariantsBesideBroken();
  }, 180_000);
});
