import { randomUUID } from 'node:crypto';
import { isolatedNames, queueBucketFor } from '@cairn/config';
import { checkStack, formatReport } from '@cairn/fault-testing';
import type { InvariantReport } from '@cairn/fault-testing';
import { testDatabaseUrl, testNatsUrl } from '@cairn/testing';
import type { NatsConnection } from '@nats-io/transport-node';
import { expect } from 'vitest';
import type { RunView, TestStack } from './stack.harness.js';

/*
 * What the fault scenarios on a whole `cairn up` stack share (docs/testing.md, "The fault suite"):
 * a run with a check submitted over REST, its receipts awaited, and the checker over everything
 * the stack holds.
 */

const SMALL = { wallSeconds: 30, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const CHECK = { id: 'says-done', source: 'steps[1].stdout', op: 'contains', value: 'done', weight: 2 };
/** Two seconds of work, then `done`: long enough to inject a fault while its first step runs. */
export const TWO_STEPS = [{ argv: ['sleep', '2'] }, { argv: ['echo', 'done'] }];

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
export const sealed = (run: RunView) => run.sealed;

export class FaultScenario {
  /** Chain ids the stack acknowledged (a 202), for L. */
  readonly acknowledged: string[] = [];

  constructor(
    readonly stack: TestStack,
    private readonly nc: NatsConnection,
    private readonly clock: { startedAt: number },
    private readonly databaseServerUrl: string = testDatabaseUrl(),
  ) {}

  /** POST /v1/runs of a run whose grade is 2/2 when its second step says `done`; the answer as it came. */
  async post(name: string, steps: unknown[] = TWO_STEPS, caps: Partial<typeof SMALL> = {}): Promise<{ status: number; body: { runId?: string; code?: string } }> {
    const response = await this.stack.api('/v1/runs', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() },
      body: JSON.stringify({ name, image: 'cairn/sandbox-busybox:1', steps, caps: { ...SMALL, ...caps }, network: 'none', checks: [CHECK], claim: { checks: [{ ...CHECK, weight: undefined }] } }),
    });
    const body = (await response.json()) as { runId?: string; code?: string };
    if (response.status === 202) this.acknowledged.push(body.runId!);
    return { status: response.status, body };
  }

  /** As `post`, which must be acknowledged: the run id. */
  async submit(name: string, steps: unknown[] = TWO_STEPS, caps: Partial<typeof SMALL> = {}): Promise<string> {
    const answer = await this.post(name, steps, caps);
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    return answer.body.runId!;
  }

  /** Waits for a receipt type on the run's chain (read through the gateway, which must be up). */
  async waitForType(runId: string, type: string, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await this.stack.types(runId)).includes(type)) {
      if (Date.now() > deadline) throw new Error(`no ${type} on ${runId}: ${(await this.stack.types(runId)).join(', ')}\n${await this.stack.logs()}`);
      await sleep(100);
    }
  }

  /** The run sealed as a run with no fault is: SUPPORTS, 2/2. */
  async expectSealedSupports(runId: string, timeoutMs = 60_000): Promise<void> {
    const run = await this.stack.waitForRun(runId, sealed, timeoutMs);
    expect(run).toMatchObject({ state: 'SEALED', verdict: 'SUPPORTS', score: 2, maxScore: 2 });
  }

  /** The checker over the whole stream so far: every invariant checked, and holding. */
  async expectInvariants(): Promise<void> {
    const report = await this.check();
    console.log(formatReport(report));
    for (const invariant of ['L', 'D', 'C', 'T', 'R', 'P'] as const) expect(report.invariants[invariant], formatReport(report)).toMatchObject({ checked: true, ok: true });
  }

  /** The checker's report over the whole stream so far. */
  async check(): Promise<InvariantReport> {
    const names = this.stack.names;
    return checkStack(
      {
        nc: this.nc,
        natsUrl: this.stack.env.CAIRN_NATS_URL ?? testNatsUrl(),
        evidenceStream: names.evidenceStream,
        subjectPrefix: isolatedNames(this.stack.stackId).CAIRN_EVIDENCE_SUBJECT_PREFIX,
        workerIds: [names.workerId],
        warmPoolLive: true,
        leasesBucket: names.leasesBucket,
        queueBucket: queueBucketFor(names.leasesBucket),
        databaseUrl: this.stack.database.url,
        databaseServerUrl: this.databaseServerUrl,
      },
      { acknowledged: this.acknowledged },
      this.clock,
    );
  }
}
