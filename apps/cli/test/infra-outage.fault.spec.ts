import { scenarioClock } from '@cairn/fault-testing';
import { startNatsServers, startOwnPostgres } from '@cairn/testing';
import type { NatsServers, OwnPostgres } from '@cairn/testing';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultScenario, sleep } from './fault-stack.harness.js';
import { TestStack } from './stack.harness.js';

/*
 * The fault matrix's infrastructure rows (issue 18, docs/testing.md "The fault matrix") on one whole
 * `cairn up` stack whose NATS server and PostgreSQL are the test's own — never the machine's, which
 * other tests share: the NATS server killed -9 and started again on the same store in the middle of
 * a run, and PostgreSQL stopped for 20 s in the middle of another. Each run seals as a run with no
 * fault does, a submit while PostgreSQL is away answers in bounded time, and the checker judges the
 * whole log after each (L, D, C, T, R with the live warm pool set aside, P).
 */

let nats: NatsServers;
let postgres: OwnPostgres;
let stack: TestStack;
let nc: NatsConnection;
let scenario: FaultScenario;
const clock = scenarioClock();

beforeAll(async () => {
  nats = await startNatsServers({ nodes: 1, label: 'cairn-outage' });
  postgres = await startOwnPostgres();
  stack = await TestStack.create('outage-fault', { CAIRN_NATS_URL: nats.urls }, { databaseServerUrl: postgres.url });
  expect((await stack.up()).outcome).toBe('started');
  // The checker's own connection rides out the restart below as the services' do.
  nc = await connect({ servers: nats.urls.split(','), maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  scenario = new FaultScenario(stack, nc, clock, postgres.url);
}, 180_000);

afterAll(async () => {
  await nc?.close().catch(() => undefined);
  if (postgres !== undefined && !(await postgres.running())) await postgres.start().catch(() => undefined);
  await stack?.dispose();
  await postgres?.dispose();
  await nats?.stop();
});

describe('fault: the infrastructure goes away mid-run', () => {
  it('the NATS server killed -9 and started again on its store mid-run: the run seals once, every invariant holds', async () => {
    const runId = await scenario.submit('nats restart', [{ argv: ['sleep', '3'] }, { argv: ['echo', 'done'] }]);
    await scenario.waitForType(runId, 'step.started');
    const node = nats.nodes[0]!;
    await node.kill('SIGKILL');
    await sleep(2000);
    await node.start();
    await scenario.expectSealedSupports(runId, 90_000);
    const types = await stack.types(runId);
    for (const once of ['run.submitted', 'policy.decided', 'run.scheduled', 'sandbox.created', 'verification.completed', 'grade.recorded', 'run.sealed']) {
      expect(types.filter((t) => t === once), `${once} on ${types.join(', ')}`).toHaveLength(1);
    }
    // The stack serves new runs at once.
    await scenario.expectSealedSupports(await scenario.submit('after the nats restart'));
    await scenario.expectInvariants();
  });

  it('PostgreSQL stopped for 20 s mid-run: the run goes on, a submit meanwhile answers in bounded time, the projections catch up', async () => {
    const runId = await scenario.submit('postgres away', [{ argv: ['sleep', '3'] }, { argv: ['echo', 'done'] }]);
    await scenario.waitForType(runId, 'step.started');
    await postgres.stop('immediate');
    const stoppedAt = Date.now();
    // Intake keeps submissions' idempotency keys in PostgreSQL: with it away a submit is refused, not lost.
    const started = Date.now();
    const during = await scenario.post('submitted while postgres is away');
    const answeredInMs = Date.now() - started;
    console.log(`a submit with PostgreSQL away answered ${during.status} ${during.body.code ?? ''} in ${answeredInMs} ms`);
    expect([202, 503]).toContain(during.status);
    if (during.status === 503) expect(during.body.code).toBe('E_UNAVAILABLE');
    expect(answeredInMs).toBeLessThan(60_000);
    await sleep(Math.max(0, 20_000 - (Date.now() - stoppedAt)));
    await postgres.start();
    await scenario.expectSealedSupports(runId, 90_000);
    if (during.status === 202) await scenario.expectSealedSupports(during.body.runId!, 90_000);
    await scenario.expectSealedSupports(await scenario.submit('after postgres is back'));
    await scenario.expectInvariants();
  });
});
