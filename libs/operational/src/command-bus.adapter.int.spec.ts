import { CairnError } from '@cairn/contracts';
import type { SubmitRunCommand } from '@cairn/contracts';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager, RetentionPolicy } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandBus } from './command-bus.adapter.js';
import type { CommandServer } from './command-bus.adapter.js';

let nc: NatsConnection;
let bus: CommandBus;
const servers: CommandServer[] = [];
const stream = uniqueName('CMDS').toUpperCase();
const prefix = uniqueName('cmdtest').toLowerCase();

function submit(name = 'hello'): SubmitRunCommand {
  return {
    tenant: 'acme',
    submitted_by: 'key:test',
    idempotency_key_sha256: createHash('sha256').update(uniqueName('key')).digest('hex'),
    spec: { name, steps: [{ argv: ['echo', 'hi'] }] },
  };
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  bus = await CommandBus.open(nc, { stream, subjectPrefix: prefix });
});

afterAll(async () => {
  for (const server of servers) await server.stop();
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(stream);
  await nc.close();
});

describe('CommandBus on the real JetStream', () => {
  it('creates a bounded work queue for commands', async () => {
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(stream);
    expect(info.config.retention).toBe(RetentionPolicy.Workqueue);
    expect(info.config.subjects).toEqual([`${prefix}.cmd.>`]);
    expect(info.config.max_age).toBe(86_400_000 * 1_000_000);
    expect(info.config.max_bytes).toBeGreaterThan(0);
    // Opening it again checks and keeps it.
    await expect(CommandBus.open(nc, { stream, subjectPrefix: prefix })).resolves.toBeInstanceOf(CommandBus);
  });

  it('delivers a command to its server and brings the reply back; failures carry their code', async () => {
    const seen: string[] = [];
    servers.push(
      await bus.serve('submit', uniqueName('intake'), (command, meta) => {
        seen.push(`${command.spec.name}:${meta.msgId}`);
        if (command.spec.name === 'clash') return Promise.reject(new CairnError('E_IDEMPOTENCY_MISMATCH', 'key reused with another body'));
        return Promise.resolve({ run_id: `run_${command.spec.name}`, duplicate: false });
      }),
    );
    expect(await bus.send('submit', submit('one'), { msgId: 'm-one', timeoutMs: 5000 })).toEqual({ ok: true, run_id: 'run_one', duplicate: false });
    expect(await bus.send('submit', submit('clash'), { msgId: 'm-clash', timeoutMs: 5000 })).toEqual({
      ok: false,
      error: { code: 'E_IDEMPOTENCY_MISMATCH', message: 'key reused with another body' },
    });
    expect(seen).toEqual(['one:m-one', 'clash:m-clash']);
  });

  it('answers a resend under the same message id (the first one may have been answered already)', async () => {
    const command = submit('again');
    const first = await bus.send('submit', command, { msgId: 'm-again', timeoutMs: 5000 });
    const second = await bus.send('submit', command, { msgId: 'm-again', timeoutMs: 5000 });
    expect(first).toEqual({ ok: true, run_id: 'run_again', duplicate: false });
    expect(second).toEqual(first);
  });

  it('refuses a payload that breaks the contract without publishing it', async () => {
    const bad = { ...submit(), spec: { name: 'x', steps: [{ argv: 'rm -rf /' }] } } as unknown as SubmitRunCommand;
    const reply = await bus.send('submit', bad, { msgId: 'm-bad', timeoutMs: 2000 });
    expect(reply.ok).toBe(false);
    expect(!reply.ok && reply.error.code).toBe('E_INPUT');
    expect(!reply.ok && reply.error.message).toContain('spec.steps[0].argv');
  });

  it('is E_UNAVAILABLE when nobody answers in time', async () => {
    const started = Date.now();
    const reply = await bus.send('cancel', { tenant: 'acme', run_id: 'run_nobody', requested_by: 'key:test' }, { msgId: 'm-cancel', timeoutMs: 400 });
    expect(reply).toMatchObject({ ok: false, error: { code: 'E_UNAVAILABLE' } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(390);
  });

  it('retries a handler that hits an outage, then answers', async () => {
    let calls = 0;
    const otherStream = uniqueName('CMDS2').toUpperCase();
    const otherPrefix = uniqueName('cmdretry').toLowerCase();
    const other = await CommandBus.open(nc, { stream: otherStream, subjectPrefix: otherPrefix });
    const server = await other.serve('cancel', uniqueName('intake'), (command, meta) => {
      calls += 1;
      if (meta.deliveryCount === 1) return Promise.reject(new CairnError('E_UNAVAILABLE', 'database restarting'));
      return Promise.resolve({ run_id: command.run_id, duplicate: true });
    });
    try {
      const reply = await other.send('cancel', { tenant: 'acme', run_id: 'run_retry', requested_by: 'key:test' }, { msgId: 'm-retry', timeoutMs: 5000 });
      expect(reply).toEqual({ ok: true, run_id: 'run_retry', duplicate: true });
      expect(calls).toBe(2);
    } finally {
      await server.stop();
      await (await jetstreamManager(nc)).streams.delete(otherStream);
    }
  });

  it('bounds a handler that never finishes: delivered again, then answered E_UNAVAILABLE, never held for ever', async () => {
    let calls = 0;
    const otherStream = uniqueName('CMDS3').toUpperCase();
    const other = await CommandBus.open(nc, { stream: otherStream, subjectPrefix: uniqueName('cmdstuck').toLowerCase() });
    const server = await other.serve(
      'cancel',
      uniqueName('intake'),
      (command, meta) => {
        calls += 1;
        // The first delivery hangs; a hung second one is answered as the outage it is.
        if (meta.deliveryCount === 1 || command.run_id === 'run_stuck') return new Promise(() => undefined);
        return Promise.resolve({ run_id: command.run_id, duplicate: false });
      },
      { handlerTimeoutMs: 300, maxDeliver: 2 },
    );
    try {
      const recovered = await other.send('cancel', { tenant: 'acme', run_id: 'run_late', requested_by: 'key:test' }, { msgId: 'm-late', timeoutMs: 5000 });
      expect(recovered).toEqual({ ok: true, run_id: 'run_late', duplicate: false });
      expect(calls).toBe(2);
      const started = Date.now();
      const stuck = await other.send('cancel', { tenant: 'acme', run_id: 'run_stuck', requested_by: 'key:test' }, { msgId: 'm-stuck', timeoutMs: 5000 });
      expect(stuck).toMatchObject({ ok: false, error: { code: 'E_UNAVAILABLE', message: 'the cancel handler did not finish within 300 ms' } });
      expect(Date.now() - started).toBeLessThan(4000);
      expect(calls).toBe(4);
    } finally {
      await server.stop();
      await (await jetstreamManager(nc)).streams.delete(otherStream);
    }
  });
});
