import { isCairnError } from '@cairn/contracts';
import type { Receipt } from '@cairn/contracts';
import { FixtureChain, retriedRunLifecycleEvents, runLifecycleEvents, sandboxSessionEvents } from '@cairn/persistence/testing';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../auth/api-key.store.js';
import { attachmentDisposition, fileMediaType, streamMediaType } from './output-media.js';
import { checkReader, execOutputsOf, execStreamSha, fileSha, RUN_OUTPUT_RECEIPTS, runOutputsOf, stepStreamSha } from './recorded-outputs.js';

const RUN = 'run_outputs1';
const SBX = 'sbx_outputs1';
const sha = (c: string) => c.repeat(64);

function chainOf(id: string, events: ReturnType<typeof runLifecycleEvents>): Receipt[] {
  const chain = new FixtureChain(id);
  return events.map((event) => chain.next(event) as Receipt);
}

function codeOf(work: () => unknown): string {
  try {
    work();
    return 'ok';
  } catch (error) {
    return isCairnError(error) ? error.code : String(error);
  }
}

const reader = (keyId: string, admin = false): Principal => ({ keyId, tenant: 'acme', scopes: admin ? ['admin'] : ['runs:read'] });

describe('the outputs a chain records', () => {
  it("names each completed step's streams and the collected files (run.executed over a step's report), by the receipts' sha256", () => {
    const events = runLifecycleEvents(RUN, 2, 4);
    const executed = events.find((e) => e.type === 'run.executed')!;
    executed.fields = { ...executed.fields, artifact_hashes: { '/out/report.txt': sha('1'), '/out/b.bin': sha('2') } };
    const outputs = runOutputsOf(RUN, chainOf(RUN, events));
    expect(outputs.holder).toBeNull();
    expect(stepStreamSha(outputs, RUN, 0, 'stdout')).toBe(sha('d'));
    expect(stepStreamSha(outputs, RUN, 1, 'stderr')).toBe(sha('e'));
    expect(fileSha(outputs, RUN, '/out/report.txt')).toBe(sha('1'));
    expect([...outputs.run.files.keys()]).toEqual(['/out/b.bin', '/out/report.txt']);
    expect(codeOf(() => stepStreamSha(outputs, RUN, 2, 'stdout'))).toBe('E_NOT_FOUND');
    expect(codeOf(() => fileSha(outputs, RUN, '/out/other'))).toBe('E_NOT_FOUND');
  });

  it('given a run retried once (ADR 0035), when its outputs are read as the service reads them, then they are the second attempt\'s', () => {
    const receipts = chainOf(RUN, retriedRunLifecycleEvents(RUN, 2, 4));
    const read = receipts.filter((r) => (RUN_OUTPUT_RECEIPTS as readonly string[]).includes(r.type));
    expect(read.filter((r) => r.type === 'step.completed')).toHaveLength(3);
    const outputs = runOutputsOf(RUN, read);
    expect(outputs.run.steps.map((s) => s.step_index)).toEqual([0, 1]);
    expect(stepStreamSha(outputs, RUN, 0, 'stdout')).toBe(sha('d'));
    expect(stepStreamSha(outputs, RUN, 0, 'stderr')).toBe(sha('e'));
    expect(fileSha(outputs, RUN, '/out/report.txt')).toBe(sha('7'));
    // `?attempt=`: the lost attempt's own step 0 (stdout 5…, stderr 6…); the current one by its number too.
    expect(outputs.attempt).toBe(2);
    expect(stepStreamSha(outputs, RUN, 0, 'stdout', 1)).toBe(sha('5'));
    expect(stepStreamSha(outputs, RUN, 0, 'stderr', 1)).toBe(sha('6'));
    expect(stepStreamSha(outputs, RUN, 0, 'stdout', 2)).toBe(sha('d'));
    // Step 1 never completed in attempt 1; there is no attempt 3.
    expect(codeOf(() => stepStreamSha(outputs, RUN, 1, 'stdout', 1))).toBe('E_NOT_FOUND');
    expect(codeOf(() => stepStreamSha(outputs, RUN, 0, 'stdout', 3))).toBe('E_NOT_FOUND');
  });

  it("keeps a run that mounts secrets its submitter's and admin keys' alone; a chain with no readable submission an admin's", () => {
    const events = runLifecycleEvents(RUN, 1, 1);
    const submitted = events[0]!;
    submitted.fields = { ...submitted.fields, spec: { name: 'with a secret', steps: [{ argv: ['true'] }], secrets: ['TOKEN'] } };
    const outputs = runOutputsOf(RUN, chainOf(RUN, events));
    expect(outputs.holder).toBe('key:k1');
    expect(codeOf(() => checkReader(outputs.holder, reader('k1'), RUN))).toBe('ok');
    expect(codeOf(() => checkReader(outputs.holder, reader('k2'), RUN))).toBe('E_FORBIDDEN');
    expect(codeOf(() => checkReader(outputs.holder, reader('k2', true), RUN))).toBe('ok');
    const headless = runOutputsOf(RUN, chainOf(RUN, runLifecycleEvents(RUN, 1, 1)).slice(1));
    expect(codeOf(() => checkReader(headless.holder, reader('k1'), RUN))).toBe('E_FORBIDDEN');
    expect(codeOf(() => checkReader(null, reader('anyone'), RUN))).toBe('ok');
  });

  it("names each completed exec's streams of a sandbox, and its holder when it mounts secrets", () => {
    const outputs = execOutputsOf(SBX, chainOf(SBX, sandboxSessionEvents(SBX, 2)));
    expect(outputs.holder).toBeNull();
    expect(execStreamSha(outputs, SBX, 'x1', 'stdout')).toMatch(/^[0-9a-f]{64}$/);
    expect(codeOf(() => execStreamSha(outputs, SBX, 'x9', 'stdout'))).toBe('E_NOT_FOUND');
    const events = sandboxSessionEvents(SBX, 1);
    events[0]!.fields = { ...events[0]!.fields, spec: { ttlSeconds: 600, secrets: ['TOKEN'] } };
    expect(execOutputsOf(SBX, chainOf(SBX, events)).holder).toBe('key:agent1');
  });

  it('refuses a receipt that does not match its contract instead of guessing', () => {
    const receipts = chainOf(RUN, runLifecycleEvents(RUN, 1, 1));
    const broken = receipts.map((r) => (r.type === 'step.completed' ? { ...r, stdout_sha256: 'not a hash' } : r));
    expect(codeOf(() => runOutputsOf(RUN, broken))).toBe('E_INTERNAL');
  });
});

describe('how outputs go out', () => {
  it('serves text as text only when it is UTF-8, and never as markup', () => {
    expect(streamMediaType(true)).toBe('text/plain; charset=utf-8');
    expect(streamMediaType(false)).toBe('application/octet-stream');
    expect(fileMediaType('/out/r.json', true)).toBe('application/json');
    expect(fileMediaType('/out/r.json', false)).toBe('application/octet-stream');
    expect(fileMediaType('/out/page.html', true)).toBe('text/plain; charset=utf-8');
    expect(fileMediaType('/out/pic.svg', true)).toBe('text/plain; charset=utf-8');
    expect(fileMediaType('/out/pic.PNG', false)).toBe('image/png');
    expect(fileMediaType('/out/notes', true)).toBe('text/plain; charset=utf-8');
    expect(fileMediaType('/out/blob', false)).toBe('application/octet-stream');
    expect(fileMediaType('/out/x.weird', false)).toBe('application/octet-stream');
  });

  it('names an attachment safely, whatever its name holds', () => {
    expect(attachmentDisposition('/out/report.json')).toBe(`attachment; filename="report.json"; filename*=UTF-8''report.json`);
    expect(attachmentDisposition('/out/ré"po\\rt %1.txt')).toBe(`attachment; filename="r__po_rt _1.txt"; filename*=UTF-8''r%C3%A9%22po%5Crt%20%251.txt`);
  });
});
