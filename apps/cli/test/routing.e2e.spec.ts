import { testNatsUrl } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { ConsumerInfo, JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';
import type { RunOutcome } from './stack.harness.js';

/*
 * Each receipt reaches only the services that act on it (issue 15, docs/adr/0012): one trivial run
 * on an isolated stack, and each service's durable consumer on the evidence stream counted — how
 * many receipts it was delivered for that run, against the run's receipts of the types it filters.
 */

let stack: TestStack;
let nc: NatsConnection;
let jsm: JetStreamManager;

beforeAll(async () => {
  stack = await TestStack.create('routing-e2e');
  await stack.up();
  nc = await connect({ servers: testNatsUrl() });
  jsm = await jetstreamManager(nc);
}, 120_000);

afterAll(async () => {
  await nc?.close();
  await stack?.dispose();
}, 120_000);

async function consumers(): Promise<Map<string, ConsumerInfo>> {
  const found = new Map<string, ConsumerInfo>();
  for await (const info of jsm.consumers.list(stack.names.evidenceStream)) if (info.config.durable_name) found.set(info.name, info);
  return found;
}

/** The types a consumer takes, read back from its filters (`<prefix>.*.<type>`); null when it takes every subject. */
function filteredTypes(info: ConsumerInfo): Set<string> | null {
  const filters = info.config.filter_subjects ?? (info.config.filter_subject ? [info.config.filter_subject] : []);
  if (filters.some((f) => f.endsWith('.>'))) return null;
  return new Set(filters.map((f) => f.split('.*.')[1]!));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('routing by receipt type', () => {
  it('delivers each receipt of a run to the services that react to its type, and to no other', async () => {
    const before = await consumers();
    const spec = await stack.specFile('routing', { name: 'routing', image: 'cairn/sandbox-busybox:1', steps: [{ argv: ['true'] }], caps: { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 }, network: 'none' });
    const cli = await stack.cairn(['run', spec, '--wait', '--json']);
    const outcome = JSON.parse(cli.stdout) as RunOutcome;
    expect(outcome.state, cli.stderr).toBe('SEALED');
    const types = await stack.types(outcome.runId);
    expect(types.at(-1)).toBe('run.sealed');

    // Every consumer has been handed, and has acknowledged, everything it takes.
    let after = await consumers();
    for (let i = 0; i < 100 && [...after.values()].some((c) => c.num_pending > 0 || c.num_ack_pending > 0); i++) {
      await sleep(100);
      after = await consumers();
    }
    // policy, scheduler, the runtime (its durable is per worker), kernel, verifier, grader: each with filters of its own types.
    const service = (name: string) => (name.startsWith('cairn-runtime-') ? 'cairn-runtime' : name);
    const reactors = [...after.values()].filter((c) => !c.name.startsWith('cairn-webhooks') && filteredTypes(c) !== null);
    expect(reactors.map((c) => service(c.name)).sort()).toEqual(['cairn-grader', 'cairn-kernel', 'cairn-policy', 'cairn-runtime', 'cairn-scheduler', 'cairn-verifier']);

    const delivered: Record<string, { delivered: number; expected: number }> = {};
    for (const c of [...after.values()]) {
      const taken = filteredTypes(c);
      const expected = taken === null ? types.length : types.filter((t) => taken.has(t)).length;
      const count = c.delivered.consumer_seq - (before.get(c.name)?.delivered.consumer_seq ?? 0);
      delivered[c.name] = { delivered: count, expected };
    }
    // One receipt each: what policy, kernel and verifier act on occurs once in a run, and nothing else reaches them.
    expect(delivered['cairn-policy']).toEqual({ delivered: 1, expected: 1 });
    expect(delivered['cairn-kernel']).toEqual({ delivered: 1, expected: 1 });
    expect(delivered['cairn-verifier']).toEqual({ delivered: 1, expected: 1 });
    for (const [name, { delivered: count, expected }] of Object.entries(delivered)) {
      // A reaction that waits (the grader before teardown) is delivered its receipt again: never another type.
      if (name === 'cairn-grader') expect(count, name).toBeGreaterThanOrEqual(expected);
      else expect(count, `${name}: ${JSON.stringify(delivered)}`).toBe(expected);
    }
    const reactorDeliveries = reactors.filter((c) => c.name !== 'cairn-grader').reduce((sum, c) => sum + delivered[c.name]!.delivered, 0);
    // Were every receipt delivered to every one of these services (the layout before), it would be this.
    expect(reactorDeliveries).toBeLessThan((reactors.length - 1) * types.length / 3);
    // With no webhook registered, the webhooks service is parked: it pulls, and is handed nothing (ADR 0024).
    const webhooks = [...after.values()].filter((c) => c.name.startsWith('cairn-webhooks'));
    expect(webhooks.map((c) => c.name)).toEqual(['cairn-webhooks-parked']);
    expect(delivered['cairn-webhooks-parked']).toEqual({ delivered: 0, expected: 0 });
    // The projector takes every receipt.
    const projector = [...after.values()].find((c) => filteredTypes(c) === null && c.name.includes('projector'));
    expect(projector === undefined ? null : delivered[projector.name]!.delivered).toBe(types.length);
  }, 120_000);
});
