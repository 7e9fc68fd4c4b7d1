import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isolatedNames, tlogNamesFor } from '@cairn/config';
import { testNatsUrl } from '@cairn/testing';
import { TransparencyLog } from '@cairn/tlog';
import { fromBase64, MerkleTree, parseSignerKey, signCheckpoint, toBase64, utf8 } from '@cairn/transparency';
import type { NoteSigner } from '@cairn/transparency';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliRun } from './cli.harness.js';
import type { RunOutcome } from './stack.harness.js';
import { TestStack } from './stack.harness.js';

/*
 * The log of seal heads end to end on a real stack (docs/proofs.md, ADR 0020): runs seal, their
 * seals become leaves, `cairn export --bundle` writes a cairn.bundle/v2 that `cairn verify --key`
 * checks offline; each tampering — a changed leaf, a swapped chain, a forged signature — fails with
 * its own reason, as do an inconsistent and a rolled-back checkpoint; `cairn checkpoints watch`
 * follows the log as it grows and stops loudly when the log is rewritten or rolled back.
 * Checkpoints here are signed on demand only (a long interval), so what the witness sees is what
 * the test did.
 */

let stack: TestStack;
let nc: NatsConnection;
let signer: NoteSigner;
let trusted = '';
const runs: string[] = [];
const SPEC = { image: 'cairn/sandbox-busybox:1', steps: [{ argv: ['echo', 'logged'] }], caps: { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 }, network: 'none' };

function ok(run: CliRun): CliRun {
  expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
  return run;
}

function refusal(run: CliRun): { code: string; reason: string; message: string } {
  expect(run.code, run.stdout + run.stderr).toBe(1);
  const body = (JSON.parse(run.stdout) as { error: { code: string; message: string; details?: { reason?: string } } }).error;
  return { code: body.code, reason: body.details?.reason ?? '', message: body.message };
}

async function sealedRun(name: string): Promise<string> {
  const cli = ok(await stack.cairn(['run', await stack.specFile(name, { name, ...SPEC }), '--wait', '--json']));
  const outcome = JSON.parse(cli.stdout) as RunOutcome;
  expect(outcome.state).toBe('SEALED');
  // The grader appends the leaf once its seal comes back to it: moments after the seal.
  for (let i = 0; i < 100; i++) {
    const proof = await stack.api(`/v1/tlog/proof/inclusion?chain=${outcome.runId}`);
    if (proof.status === 200) return outcome.runId;
    expect(proof.status).toBe(404);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${outcome.runId} was not logged within 10 s:\n${await stack.logs()}`);
}

async function exportBundle(runId: string): Promise<{ file: string; bundle: Record<string, unknown> }> {
  const file = join(stack.home, `${runId}.v2.json`);
  ok(await stack.cairn(['export', runId, '--bundle', '-o', file, '--json']));
  return { file, bundle: JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown> };
}

async function verifyAltered(name: string, bundle: Record<string, unknown>): Promise<CliRun> {
  const file = join(stack.home, name);
  await writeFile(file, JSON.stringify(bundle));
  return stack.cairn(['verify', file, '--key', trusted, '--json']);
}

function flipSignature(note: string): string {
  const lines = note.split('\n');
  const line = lines.at(-2)!;
  const cut = line.lastIndexOf(' ') + 1;
  const raw = fromBase64(line.slice(cut));
  raw[20] = raw[20]! ^ 0x01;
  lines[lines.length - 2] = `${line.slice(0, cut)}${toBase64(raw)}`;
  return lines.join('\n');
}

const tlog = () => {
  const names = isolatedNames(stack.stackId);
  return tlogNamesFor(names.CAIRN_EVIDENCE_STREAM, names.CAIRN_EVIDENCE_SUBJECT_PREFIX);
};

beforeAll(async () => {
  stack = await TestStack.create('tlog-e2e', { CAIRN_TLOG_CHECKPOINT_INTERVAL_MS: '3600000' });
  expect((await stack.up()).outcome).toBe('started');
  nc = await connect({ servers: testNatsUrl() });
  // The deployment's own key, read as the operator (who holds it) could: to forge what only the operator can.
  signer = await parseSignerKey(await readFile(join(stack.home, 'seal.key'), 'utf8'));
  const published = (await (await stack.api('/.well-known/cairn/keys')).json()) as { keys: { key: string }[] };
  trusted = published.keys[0]!.key;
  runs.push(await sealedRun('first'), await sealedRun('second'));
}, 240_000);

afterAll(async () => {
  await nc?.close();
  await stack?.dispose();
});

describe('the log of seal heads over REST', () => {
  it('serves a signed checkpoint, inclusion and consistency proofs, with precise errors', async () => {
    const proof = (await (await stack.api(`/v1/tlog/proof/inclusion?chain=${runs[1]}`)).json()) as { leafIndex: number; treeSize: number; checkpoint: string };
    expect(proof.treeSize).toBeGreaterThan(proof.leafIndex);
    const checkpoint = (await (await stack.api('/v1/tlog/checkpoint')).json()) as { origin: string; size: number; checkpoint: string };
    expect(checkpoint.origin).toBe(`cairn/${stack.stackId}`);
    expect(checkpoint.size).toBe(proof.treeSize);
    expect(checkpoint.checkpoint).toMatch(new RegExp(`^cairn/${stack.stackId}\\n${checkpoint.size}\\n[A-Za-z0-9+/]{43}=\\n\\n\u2014 cairn/${stack.stackId} `));
    const consistency = await stack.api(`/v1/tlog/proof/consistency?from=1&to=${checkpoint.size}`);
    expect(consistency.status).toBe(200);

    const expectError = async (path: string, status: number, code: string, reason?: string) => {
      const response = await stack.api(path);
      expect(response.status, path).toBe(status);
      const body = (await response.json()) as { code: string; details?: { reason?: string } };
      expect(body.code, path).toBe(code);
      if (reason !== undefined) expect(body.details?.reason, path).toBe(reason);
    };
    await expectError('/v1/tlog/proof/consistency?from=2&to=1', 400, 'E_INPUT');
    await expectError(`/v1/tlog/proof/consistency?from=0&to=${checkpoint.size + 1000}`, 404, 'E_NOT_FOUND');
    await expectError('/v1/tlog/proof/consistency?from=x&to=1', 400, 'E_INPUT');
    await expectError('/v1/tlog/proof/inclusion?chain=adm_default', 400, 'E_INPUT');
    await expectError('/v1/tlog/proof/inclusion?chain=run_nosuchrun', 404, 'E_NOT_FOUND');
    // A sandbox session: not in the log while open, in it once destroyed and sealed.
    const created = await stack.api('/v1/sandboxes', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ image: 'cairn/sandbox-busybox:1' }) });
    expect(created.status, await created.clone().text()).toBe(201);
    const sandboxId = ((await created.json()) as { id: string }).id;
    await expectError(`/v1/tlog/proof/inclusion?chain=${sandboxId}`, 404, 'E_NOT_FOUND', 'not_sealed');
    expect((await stack.api(`/v1/sandboxes/${sandboxId}`, { method: 'DELETE' })).status).toBe(200);
    let logged = 0;
    for (let i = 0; i < 100 && logged !== 200; i++) {
      logged = (await stack.api(`/v1/tlog/proof/inclusion?chain=${sandboxId}`)).status;
      if (logged !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(logged).toBe(200);
    // Another tenant's key sees this tenant's chains as unknown.
    const other = await stack.mintKey('tlogother', ['runs:read']);
    const foreign = await fetch(`${stack.url}/v1/tlog/proof/inclusion?chain=${runs[0]}`, { headers: { authorization: `Bearer ${other}` } });
    expect(foreign.status).toBe(404);
    expect((await fetch(`${stack.url}/v1/tlog/checkpoint`)).status).toBe(401);
  });
});

describe('cairn.bundle/v2 and cairn verify, offline', () => {
  it('exports a v2 bundle that verifies with the pinned key: chain, seal signature, checkpoint signature, inclusion', async () => {
    const { file, bundle } = await exportBundle(runs[0]!);
    expect(bundle).toMatchObject({ format: 'cairn.bundle/v2', runId: runs[0], sealKeys: [trusted], inclusion: { chainId: runs[0] } });
    const human = ok(await stack.cairn(['verify', file, '--key', trusted]));
    expect(human.stdout).toMatch(/seal signed by .*: verified\nin the log: leaf \d+ of \d+, checkpoint signed by .*: verified\n$/);
    const machine = JSON.parse(ok(await stack.cairn(['verify', file, '--key', trusted, '--json'])).stdout) as Record<string, unknown>;
    expect(machine).toMatchObject({ ok: true, format: 'cairn.bundle/v2', seal: { verified: true }, log: { included: true, verified: true } });
    // Without a key the proofs are shown, not checked.
    expect(ok(await stack.cairn(['verify', file])).stdout).toContain('not checked (give --key or --trust-file)');
  });

  it('says what a v1 bundle does not prove', async () => {
    const file = join(stack.home, 'v1.json');
    ok(await stack.cairn(['verify', runs[0]!, '-o', file]));
    const checked = ok(await stack.cairn(['verify', file, '--key', trusted]));
    expect(checked.stdout).toContain('cairn.bundle/v1: no inclusion proof');
  });

  it('detects a changed leaf, a swapped chain, a forged checkpoint signature and a forged seal signature, each by its reason', async () => {
    const { bundle: a } = await exportBundle(runs[0]!);
    const { bundle: b } = await exportBundle(runs[1]!);
    const inclusionA = a.inclusion as Record<string, unknown>;

    // The log's leaf is another statement than this seal's.
    const changedLeaf = refusal(await verifyAltered('changed-leaf.json', { ...a, inclusion: { ...inclusionA, leafHash: (b.inclusion as { leafHash: string }).leafHash } }));
    expect(changedLeaf).toMatchObject({ code: 'E_CHAIN_BROKEN', reason: 'leaf_mismatch' });

    // Another run's receipts (and seal) with this run's proof.
    const swapped = refusal(await verifyAltered('swapped.json', { ...b, inclusion: inclusionA }));
    expect(swapped).toMatchObject({ code: 'E_CHAIN_BROKEN', reason: 'proof_chain_mismatch' });

    // The checkpoint's signature, one bit off.
    const forged = refusal(await verifyAltered('forged-checkpoint.json', { ...a, inclusion: { ...inclusionA, checkpoint: flipSignature(inclusionA.checkpoint as string) } }));
    expect(forged).toMatchObject({ code: 'E_CHAIN_BROKEN', reason: 'checkpoint_signature_invalid' });

    // A proof path that does not lead to the root.
    const hashes = [...(inclusionA.hashes as string[])];
    if (hashes.length > 0) {
      hashes[0] = toBase64(new Uint8Array(32));
      expect(refusal(await verifyAltered('bad-path.json', { ...a, inclusion: { ...inclusionA, hashes } }))).toMatchObject({ reason: 'inclusion_invalid' });
    }

    // A bundle whose sealSignature is not its seal's.
    expect(refusal(await verifyAltered('other-signature.json', { ...a, sealSignature: b.sealSignature }))).toMatchObject({ reason: 'bundle_signature_mismatch' });
  });

  it('checks two checkpoints: consistent ones pass, a fork and a rollback fail with their reasons', async () => {
    const older = join(stack.home, 'older.checkpoint');
    ok(await stack.cairn(['checkpoints', 'get', '-o', older]));
    // Its inclusion proof asked for (sealedRun), a checkpoint covering it was signed on demand.
    runs.push(await sealedRun('third'));
    const newer = join(stack.home, 'newer.checkpoint');
    ok(await stack.cairn(['checkpoints', 'get', '-o', newer]));
    const passed = JSON.parse(ok(await stack.cairn(['verify', '--checkpoint', older, newer, '--key', trusted, '--json'])).stdout) as { from: number; to: number };
    expect(passed.to).toBe(passed.from + 1);

    // The leaves the log really holds, to forge from.
    const names = tlog();
    const reader = await TransparencyLog.open(nc, names, 'reader');
    const real = await reader.currentTree();
    reader.close();
    const leaves = Array.from({ length: real.size }, (_, i) => real.leaf(i));

    // A fork: the operator signs a larger tree whose first leaf differs, and hands out its proof.
    const fork = new MerkleTree();
    await fork.appendData(utf8('cairn.seal/v1\nchain run_forged\n'));
    for (const leaf of leaves.slice(1)) await fork.append(leaf);
    await fork.appendData(utf8('one more\n'));
    const forkNote = join(stack.home, 'fork.checkpoint');
    await writeFile(forkNote, await signCheckpoint(fork.size, await fork.root(), signer));
    const forkProof = join(stack.home, 'fork.proof.json');
    await writeFile(forkProof, JSON.stringify({ from: passed.to, to: fork.size, hashes: (await fork.consistencyProof(passed.to)).map(toBase64) }));
    expect(refusal(await stack.cairn(['verify', '--checkpoint', newer, forkNote, '--proof', forkProof, '--key', trusted, '--json']))).toMatchObject({
      code: 'E_CHAIN_BROKEN',
      reason: 'checkpoint_inconsistent',
    });

    // A rollback: a checkpoint of the honest log, but smaller than one already seen.
    const smaller = join(stack.home, 'smaller.checkpoint');
    await writeFile(smaller, await signCheckpoint(passed.from, await real.root(passed.from), signer));
    expect(refusal(await stack.cairn(['verify', '--checkpoint', newer, smaller, '--key', trusted, '--json']))).toMatchObject({ reason: 'log_rolled_back' });
    // And a checkpoint nobody trusted signed.
    await writeFile(smaller, flipSignature(await readFile(newer, 'utf8')));
    expect(refusal(await stack.cairn(['verify', '--checkpoint', older, smaller, '--key', trusted, '--json']))).toMatchObject({ reason: 'checkpoint_signature_invalid' });
  });
});

describe('cairn seal-key rotate', () => {
  it('publishes the new key first and keeps the old one as retired: old bundles verify with the old key, new seals and checkpoints are signed with the new one', async () => {
    const before = await exportBundle(runs[0]!);
    const rotated = JSON.parse(ok(await stack.cairn(['seal-key', 'rotate', '--json'])).stdout) as { current: string; retired: string; restarted: string[] };
    expect(rotated.retired).toBe(trusted);
    expect(rotated.current).not.toBe(trusted);
    expect(rotated.current.split('+')[0]).toBe(trusted.split('+')[0]);
    expect(rotated.restarted).toEqual(['grader', 'gateway']);
    // The private key is never printed.
    // (`PRIVATE+KEY+<name>+<id>+<base64 seed>`: the base64 may itself hold a `+`, so everything after the fourth.)
    const secret = (await readFile(join(stack.home, 'seal.key'), 'utf8')).trim().split('+').slice(4).join('+');
    expect(secret.length).toBeGreaterThan(40);
    expect(JSON.stringify(rotated)).not.toContain(secret);
    const published = (await (await stack.api('/.well-known/cairn/keys')).json()) as { keys: { key: string; status: string }[] };
    expect(published.keys.map((k) => [k.key, k.status])).toEqual([
      [rotated.current, 'current'],
      [trusted, 'retired'],
    ]);
    // A bundle from before still verifies offline with the key it was sealed with.
    ok(await stack.cairn(['verify', before.file, '--key', trusted]));

    const fresh = await sealedRun('after-rotation');
    runs.push(fresh);
    const after = await exportBundle(fresh);
    expect(after.bundle).toMatchObject({ format: 'cairn.bundle/v2', sealKeys: [rotated.current, trusted] });
    const verified = JSON.parse(ok(await stack.cairn(['verify', after.file, '--key', rotated.current, '--json'])).stdout) as Record<string, unknown>;
    expect(verified).toMatchObject({ ok: true, chainId: fresh });
    // Pinned to the old key alone, the new seal is not taken for one of it.
    expect((await stack.cairn(['verify', after.file, '--key', trusted, '--json'])).code).toBe(1);
    // The witness below pins the key now in force, and forges with it.
    trusted = rotated.current;
    signer = await parseSignerKey(await readFile(join(stack.home, 'seal.key'), 'utf8'));
  });
});

describe('cairn checkpoints watch', () => {
  it('follows the log as it grows, and fails loudly once it is rewritten or rolled back', async () => {
    const state = join(stack.home, 'witness.state');
    const watch = () => stack.cairn(['checkpoints', 'watch', stack.url, '--state', state, '--once', '--key', trusted, '--json']);
    const first = JSON.parse(ok(await watch()).stdout) as { size: number; grew: number | null };
    expect(first.grew).toBeNull();
    runs.push(await sealedRun('fourth'));
    const grown = JSON.parse(ok(await watch()).stdout) as { size: number; grew: number };
    expect(grown).toMatchObject({ size: first.size + 1, grew: 1 });
    expect(await readFile(state, 'utf8')).toMatch(new RegExp(`^cairn/${stack.stackId}\\n${grown.size}\\n`));

    // The operator rewrites the log: the stream made anew with a first leaf changed and one more,
    // and a checkpoint of it signed with the deployment's key.
    const names = tlog();
    const reader = await TransparencyLog.open(nc, names, 'reader');
    const real = await reader.currentTree();
    reader.close();
    const jsm = await jetstreamManager(nc);
    const originals: Uint8Array[] = [];
    for (let i = 0; i < real.size; i++) {
      const message = await jsm.direct.getMessage(names.stream, { seq: i + 1 });
      originals.push(message!.data);
    }
    await jsm.streams.delete(names.stream);
    const writer = await TransparencyLog.open(nc, names, 'writer');
    await writer.appendLeaf('run_forged', utf8('cairn.seal/v1\nchain run_forged\n'));
    for (const [i, leaf] of originals.entries()) if (i > 0) await writer.appendLeaf(runs[i] ?? `run_x${i}`, leaf);
    await writer.appendLeaf('run_extra', utf8('one more\n'));
    const forged = await writer.currentTree();
    writer.close();
    const kv = await new Kvm(nc).open(names.checkpointBucket);
    await kv.put('latest', await signCheckpoint(forged.size, await forged.root(), signer));

    const rewritten = refusal(await watch());
    expect(rewritten).toMatchObject({ code: 'E_CHAIN_BROKEN', reason: 'checkpoint_inconsistent' });
    expect(rewritten.message).toContain('forked');
    // The state still holds the last checkpoint that verified.
    expect(await readFile(state, 'utf8')).toMatch(new RegExp(`^cairn/${stack.stackId}\\n${grown.size}\\n`));

    // Rolled back: a smaller checkpoint served.
    await kv.put('latest', await signCheckpoint(1, await forged.root(1), signer));
    const rolledBack = refusal(await watch());
    expect(rolledBack).toMatchObject({ code: 'E_CHAIN_BROKEN', reason: 'log_rolled_back' });
    expect(rolledBack.message).toContain(`it had ${grown.size} leaves, it now shows 1`);
  });
});
