import { createHash } from 'node:crypto';
import { CairnError, ERROR_CODES } from '@cairn/contracts';
import type { OutputStream, RunArtifacts } from '@cairn/contracts';
import type { Bytes } from '@cairn/sdk/client';
import { sealReceipt } from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import type { Bundle, CairnRuns, EventPage, Regraded, Run, Submitted } from './cairn-rest.client.js';
import { callRunTool, findRunTool, RUN_TOOLS, verifyRun } from './run-tools.js';
import { MCP_ERROR_HINTS, toolError } from './tool-errors.js';

const RUN = 'run_abc123';
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPEC = { name: 'echo', image: 'cairn/sandbox-busybox:1', steps: [{ argv: ['echo', 'hello'] }] };

/** A valid chain of `length` receipts; `fields[seq]` is merged into that one (before it is hashed). */
function chain(length: number, fields: Record<number, Record<string, unknown>> = {}): Record<string, unknown>[] {
  const receipts: Record<string, unknown>[] = [];
  let prev = '0'.repeat(64);
  for (let seq = 1; seq <= length; seq += 1) {
    const type = seq === 1 ? 'run.submitted' : seq === length ? 'run.sealed' : 'step.completed';
    const receipt = sealReceipt(prev, { v: 1, seq, run_id: RUN, tenant: 'default', type, actor: 'intake', ts: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString(), causation: null, ...fields[seq] });
    receipts.push(receipt);
    prev = receipt.hash;
  }
  return receipts;
}

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const OUTPUTS: Record<string, Uint8Array> = {
  '0/stdout': new TextEncoder().encode('hello\n'),
  '0/stderr': Uint8Array.from([0xff, 0x00]),
  '/out/report.json': new TextEncoder().encode('{"ok":true}'),
};
const recorded = (key: string) => ({ sha256: sha(OUTPUTS[key]!), bytes: OUTPUTS[key]!.byteLength, writtenBytes: OUTPUTS[key]!.byteLength, truncated: false });

/** A port double: records what was sent, answers from fixed data. */
class FakeRuns implements CairnRuns {
  submitted: { spec: unknown; key: string }[] = [];
  receipts = chain(4);
  headHash: string | null = null;
  submitRun(spec: unknown, idempotencyKey: string): Promise<Submitted> {
    this.submitted.push({ spec, key: idempotencyKey });
    return Promise.resolve({ runId: RUN, state: 'SUBMITTED', duplicate: false });
  }
  regraded: { runId: string; reason: string | undefined }[] = [];
  regrade(runId: string, reason: string | undefined): Promise<Regraded> {
    if (runId !== RUN) return Promise.reject(new CairnError('E_SEALED', `run ${runId} is sealed`));
    this.regraded.push({ runId, reason });
    return Promise.resolve({ runId, duplicate: false });
  }
  getRun(runId: string): Promise<Run> {
    if (runId !== RUN) return Promise.reject(new CairnError('E_NOT_FOUND', `no run ${runId}`));
    const at = '2026-01-01T00:00:00.000Z';
    return Promise.resolve({ runId, tenant: 'default', name: null, state: 'SEALED', errorCode: null, verdict: 'SUPPORTS', score: 1, maxScore: 1, upperBound: 1, eventCount: 4, headHash: 'c'.repeat(64), sealed: true, createdAt: at, updatedAt: at, traceId: TRACE_ID });
  }
  events(_runId: string, after: number, limit: number): Promise<EventPage> {
    const items = this.receipts.slice(after, after + limit) as EventPage['items'];
    return Promise.resolve({ items, nextAfter: after + limit < this.receipts.length ? after + limit : null });
  }
  bundle(runId: string): Promise<Bundle> {
    return Promise.resolve({ format: 'cairn.bundle/v1', runId, receipts: this.receipts, verdict: 'SUPPORTS', grade: { score: 1, maxScore: 1, upperBound: 1 }, headHash: this.headHash } as unknown as Bundle);
  }
  artifacts(runId: string): Promise<RunArtifacts> {
    return Promise.resolve({
      runId,
      steps: [{ index: 0, name: 'greet', exitCode: 0, stdout: recorded('0/stdout'), stderr: recorded('0/stderr') }],
      items: [{ path: '/out/report.json', sha256: recorded('/out/report.json').sha256, bytes: 11 }],
    });
  }
  expected: string[] = [];
  private read(key: string, expectedSha256: string): Promise<Bytes> {
    this.expected.push(expectedSha256);
    const bytes = OUTPUTS[key];
    if (bytes === undefined) return Promise.reject(new CairnError('E_NOT_FOUND', `no ${key}`));
    return Promise.resolve({ bytes, sha256: sha(bytes), contentType: 'application/octet-stream', seq: null });
  }
  output(_runId: string, step: number, stream: OutputStream, expectedSha256: string): Promise<Bytes> {
    return this.read(`${step}/${stream}`, expectedSha256);
  }
  artifact(_runId: string, path: string, expectedSha256: string): Promise<Bytes> {
    return this.read(path, expectedSha256);
  }
}

function tool(name: string) {
  const found = findRunTool(name);
  if (found === undefined) throw new Error(`no tool ${name}`);
  return found;
}

describe('the run tools', () => {
  it('advertise object input schemas; run_submit carries the RunSpec schema from the contracts', () => {
    expect(RUN_TOOLS.map((t) => t.definition.name).sort()).toEqual(['run_artifact', 'run_events', 'run_outputs', 'run_regrade', 'run_status', 'run_submit', 'run_verify']);
    for (const t of RUN_TOOLS) expect(t.definition.inputSchema.type).toBe('object');
    const submit = tool('run_submit').definition.inputSchema as unknown as { properties: { spec: { properties: Record<string, unknown>; required: string[] } }; required: string[] };
    expect(submit.required.sort()).toEqual(['idempotencyKey', 'spec']);
    expect(Object.keys(submit.properties.spec.properties)).toEqual(expect.arrayContaining(['steps', 'image', 'caps', 'network']));
    expect(submit.properties.spec.required).toEqual(expect.arrayContaining(['steps']));
  });

  it('submit sends a valid spec with its key; a bad spec is E_INPUT naming the field, and nothing is sent', async () => {
    const runs = new FakeRuns();
    const ok = await callRunTool(tool('run_submit'), runs, { spec: SPEC, idempotencyKey: 'k-1' });
    expect(ok.isError).toBeUndefined();
    expect(ok.structuredContent).toEqual({ runId: RUN, state: 'SUBMITTED', duplicate: false });
    expect(runs.submitted).toEqual([{ spec: SPEC, key: 'k-1' }]);

    const bad = await callRunTool(tool('run_submit'), runs, { spec: { ...SPEC, steps: [{ argv: 'echo hello' }] }, idempotencyKey: 'k-2' });
    expect(bad.isError).toBe(true);
    expect(bad.structuredContent).toMatchObject({ error: { code: 'E_INPUT', message: expect.stringContaining('steps') as string } });
    expect(bad.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/^E_INPUT: /) as string });
    const noKey = await callRunTool(tool('run_submit'), runs, { spec: SPEC });
    expect(noKey.structuredContent).toMatchObject({ error: { code: 'E_INPUT', message: expect.stringContaining('idempotencyKey') as string } });
    const extra = await callRunTool(tool('run_submit'), runs, { spec: SPEC, idempotencyKey: 'k', tenant: 'other' });
    expect(extra.structuredContent).toMatchObject({ error: { code: 'E_INPUT' } });
    expect(runs.submitted).toHaveLength(1);
  });

  it('regrade asks the gateway with the run id and the reason; a bad id or an unknown field is E_INPUT and nothing is sent; a refusal keeps its code', async () => {
    const runs = new FakeRuns();
    const ok = await callRunTool(tool('run_regrade'), runs, { runId: RUN, reason: 'the judge is back' });
    expect(ok.isError).toBeUndefined();
    expect(ok.structuredContent).toEqual({ runId: RUN, duplicate: false });
    for (const args of [{ runId: 'RUN NOPE' }, { runId: RUN, reason: '' }, { runId: RUN, force: true }, {}]) {
      const bad = await callRunTool(tool('run_regrade'), runs, args);
      expect(bad.structuredContent, JSON.stringify(args)).toMatchObject({ error: { code: 'E_INPUT' } });
    }
    expect(runs.regraded).toEqual([{ runId: RUN, reason: 'the judge is back' }]);
    const sealed = await callRunTool(tool('run_regrade'), runs, { runId: 'run_sealed1' });
    expect(sealed.isError).toBe(true);
    expect(sealed.structuredContent).toMatchObject({ error: { code: 'E_SEALED', hint: expect.stringContaining('sealed') as string } });
    expect(tool('run_regrade').definition.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false });
  });

  it('status and events check the run id first; a Cairn error from the gateway comes back as a tool error with its code', async () => {
    const runs = new FakeRuns();
    const badId = await callRunTool(tool('run_status'), runs, { runId: 'RUN NOPE' });
    expect(badId.structuredContent).toMatchObject({ error: { code: 'E_INPUT' } });
    // A traced run's status carries its trace id, and the tool says so (an agent can find the trace).
    const status = await callRunTool(tool('run_status'), runs, { runId: RUN });
    expect(status.structuredContent).toMatchObject({ runId: RUN, state: 'SEALED', traceId: TRACE_ID });
    expect(tool('run_status').definition.description).toContain('traceId');
    const missing = await callRunTool(tool('run_status'), runs, { runId: 'run_other' });
    expect(missing).toMatchObject({ isError: true, structuredContent: { error: { code: 'E_NOT_FOUND', hint: MCP_ERROR_HINTS.E_NOT_FOUND } } });
    const page = await callRunTool(tool('run_events'), runs, { runId: RUN, after: 1, limit: 2 });
    expect(page.structuredContent).toMatchObject({ runId: RUN, nextAfter: 3 });
    expect((page.structuredContent as { items: { seq: number }[] }).items.map((r) => r.seq)).toEqual([2, 3]);
    const tooMany = await callRunTool(tool('run_events'), runs, { runId: RUN, limit: 5000 });
    expect(tooMany.structuredContent).toMatchObject({ error: { code: 'E_INPUT' } });
  });

  it('verify recomputes the chain: ok with the head; an edited receipt is E_CHAIN_BROKEN at its seq; a bundle head that disagrees too', async () => {
    const runs = new FakeRuns();
    const ok = await verifyRun(runs, RUN);
    expect(ok).toMatchObject({ ok: true, runId: RUN, count: 4, headSeq: 4, headHash: runs.receipts[3]!.hash, sealed: true, verdict: 'SUPPORTS' });

    runs.receipts[2] = { ...runs.receipts[2], actor: 'someone-else' };
    const broken = await callRunTool(tool('run_verify'), runs, { runId: RUN });
    expect(broken).toMatchObject({ isError: true, structuredContent: { error: { code: 'E_CHAIN_BROKEN', details: { firstBadSeq: 3, reason: 'hash_mismatch', verified: 2 } } } });

    const lying = new FakeRuns();
    lying.headHash = 'f'.repeat(64);
    await expect(verifyRun(lying, RUN)).rejects.toMatchObject({ code: 'E_CHAIN_BROKEN', details: { reason: 'head_mismatch' } });
    const empty = new FakeRuns();
    empty.receipts = [];
    await expect(verifyRun(empty, RUN)).rejects.toMatchObject({ code: 'E_CHAIN_BROKEN', details: { reason: 'empty' } });
  });

  it('verify never answers ok for a chain that records its own break (ADR 0033): E_CHAIN_BROKEN break_recorded at the alert, quoting it', async () => {
    const message = 'the message at stream seq 12 on cairn.evidence.run_abc123.step.completed, after seq 2, is not a receipt (not JSON); it is no part of the hash chain';
    const alert = (severity: string) => ({ type: 'alert.raised', actor: 'runtime', severity, error_code: 'E_CHAIN_BROKEN', message });
    const runs = new FakeRuns();
    runs.receipts = chain(5, { 3: alert('critical'), 4: { type: 'run.failed', actor: 'runtime', error_code: 'E_CHAIN_BROKEN', message } });
    const broken = await callRunTool(tool('run_verify'), runs, { runId: RUN });
    expect(broken).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'E_CHAIN_BROKEN', message: expect.stringContaining(`records at seq 3 that it was broken: ${message}`) as string, details: { runId: RUN, firstBadSeq: 3, reason: 'break_recorded', verified: 5 } } },
    });
    expect(broken.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/^E_CHAIN_BROKEN: the receipts of run_abc123 verify, but the chain records at seq 3/) as string });

    // A warning, or an alert about something else, is no recorded break: the chain verifies.
    const warned = new FakeRuns();
    warned.receipts = chain(5, { 3: alert('warning') });
    expect(await verifyRun(warned, RUN)).toMatchObject({ ok: true, count: 5 });
    const leaked = new FakeRuns();
    leaked.receipts = chain(5, { 3: { ...alert('critical'), error_code: 'E_SECRET_SEEN' } });
    expect(await verifyRun(leaked, RUN)).toMatchObject({ ok: true, count: 5 });
  });

  it("outputs: each step's streams as text or base64, read against the listing's sha256; a file by its path; unknown ones E_NOT_FOUND", async () => {
    const runs = new FakeRuns();
    const all = await callRunTool(tool('run_outputs'), runs, { runId: RUN });
    expect(all.structuredContent).toMatchObject({
      runId: RUN,
      steps: [{ index: 0, name: 'greet', exitCode: 0, stdout: { encoding: 'utf8', content: 'hello\n', bytes: 6 }, stderr: { encoding: 'base64', content: '/wA=', bytes: 2 } }],
      files: [{ path: '/out/report.json' }],
    });
    expect(runs.expected).toEqual([recorded('0/stdout').sha256, recorded('0/stderr').sha256]);
    const noStep = await callRunTool(tool('run_outputs'), runs, { runId: RUN, step: 3 });
    expect(noStep.structuredContent).toMatchObject({ error: { code: 'E_NOT_FOUND' } });

    const file = await callRunTool(tool('run_artifact'), runs, { runId: RUN, path: 'out/report.json' });
    expect(file.structuredContent).toEqual({ runId: RUN, path: '/out/report.json', sha256: recorded('/out/report.json').sha256, bytes: 11, encoding: 'utf8', content: '{"ok":true}' });
    const asBase64 = await callRunTool(tool('run_artifact'), runs, { runId: RUN, path: '/out/report.json', encoding: 'base64' });
    expect(asBase64.structuredContent).toMatchObject({ encoding: 'base64', content: Buffer.from('{"ok":true}').toString('base64') });
    const missing = await callRunTool(tool('run_artifact'), runs, { runId: RUN, path: '/out/nope' });
    expect(missing.structuredContent).toMatchObject({ error: { code: 'E_NOT_FOUND' } });
  });

  it('maps every error code to a hint, and anything that is not a CairnError to E_INTERNAL without its message', () => {
    for (const code of ERROR_CODES) expect(MCP_ERROR_HINTS[code].length).toBeGreaterThan(10);
    const internal = toolError(new Error('connection string postgres://secret@db'));
    expect(internal.structuredContent).toMatchObject({ error: { code: 'E_INTERNAL' } });
    expect(JSON.stringify(internal)).not.toContain('secret');
  });
});
