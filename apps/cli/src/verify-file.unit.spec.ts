import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jsonLine, sealReceipt } from '@cairn/evidence';
import { awkwardText, foreignJson } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUNDLE_FORMAT, verifyFile } from './verify-file.js';

const CHAIN = 'run_verify-file-unit';
let dir: string;

function chain(length: number, text: string): Record<string, unknown>[] {
  const receipts: Record<string, unknown>[] = [];
  let prev = '0'.repeat(64);
  for (let seq = 1; seq <= length; seq += 1) {
    const receipt = sealReceipt(prev, { v: 1, seq, run_id: CHAIN, tenant: 'default', type: 'step.completed', actor: 'runtime', ts: '2026-12-01T00:00:00.000Z', causation: null, argv: ['echo', text, String(seq)] });
    receipts.push(receipt);
    prev = receipt.hash;
  }
  return receipts;
}

async function file(name: string, content: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, content);
  return path;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-verify-file-unit-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('verifyFile', () => {
  it('hands back the breaks a chain records of itself (alert.raised E_CHAIN_BROKEN, ADR 0033), from a chain file and a bundle', async () => {
    const receipts = chain(2, 'x');
    const alert = sealReceipt(receipts[1]!.hash as string, { v: 1, seq: 3, run_id: CHAIN, tenant: 'default', type: 'alert.raised', actor: 'runtime', ts: '2026-12-01T00:00:00.000Z', causation: `${CHAIN}:2`, severity: 'critical', error_code: 'E_CHAIN_BROKEN', message: 'the message at stream seq 9 is not a receipt' });
    const other = sealReceipt(alert.hash, { v: 1, seq: 4, run_id: CHAIN, tenant: 'default', type: 'alert.raised', actor: 'runtime', ts: '2026-12-01T00:00:00.000Z', causation: `${CHAIN}:3`, severity: 'critical', error_code: 'E_SECRET_SEEN', message: 'not a break' });
    const all = [...receipts, alert, other];
    const fromChain = await verifyFile(await file('recorded.jsonl', all.map(jsonLine).join('')));
    expect(fromChain.verification.ok).toBe(true);
    expect(fromChain.recordedBreaks).toEqual([{ seq: 3, message: 'the message at stream seq 9 is not a receipt' }]);
    const fromBundle = await verifyFile(await file('recorded.json', JSON.stringify({ format: BUNDLE_FORMAT, runId: CHAIN, receipts: all, headHash: other.hash })));
    expect(fromBundle.recordedBreaks).toEqual([{ seq: 3, message: 'the message at stream seq 9 is not a receipt' }]);
  });

  it('verifies a chain whose strings hold every control character, U+2028 and U+2029, however its lines were written', async () => {
    const receipts = chain(4, awkwardText({ nul: true }));
    const head = receipts.at(-1)!.hash;
    const forms: Record<string, string> = {
      jsonLine: receipts.map(jsonLine).join(''),
      rawStringify: receipts.map((r) => `${JSON.stringify(r)}\n`).join(''),
      foreign: receipts.map((r) => `${foreignJson(r)}\n`).join(''),
      foreignCrlf: `\ufeff${receipts.map((r) => `${foreignJson(r)}\r\n`).join('')}`,
    };
    expect(forms.foreign).toContain('\u2028');
    for (const [name, content] of Object.entries(forms)) {
      const checked = await verifyFile(await file(`${name}.jsonl`, content));
      expect(checked, name).toEqual({ format: 'chain', verification: { ok: true, chainId: CHAIN, count: 4, headHash: head, headSeq: 4 }, last: receipts.at(-1), judgedReceipts: [], recordedBreaks: [] });
    }
  });

  it('reads a one-line bundle whose strings hold raw separators as a bundle', async () => {
    const receipts = chain(2, awkwardText());
    const checked = await verifyFile(await file('one-line.bundle.json', `${foreignJson({ format: BUNDLE_FORMAT, runId: CHAIN, receipts })}\n`));
    expect(checked.format).toBe('bundle');
    expect(checked.verification).toMatchObject({ ok: true, count: 2, headHash: receipts[1]!.hash });
  });

  it('breaks the chain at a line longer than the limit, after verifying the lines before it', async () => {
    const receipts = chain(3, 'x');
    const long = { ...receipts[2], pad: 'y'.repeat(4096) };
    const checked = await verifyFile(await file('long.jsonl', [receipts[0], receipts[1], long].map(jsonLine).join('')), { maxLineLength: 2048 });
    expect(checked.verification).toMatchObject({ ok: false, firstBadSeq: 3, reason: 'malformed', message: 'line 3 is longer than 2048 characters', verified: 2 });
    // The same file under the default limit: the line is read, and its extra field fails the hash.
    expect((await verifyFile(join(dir, 'long.jsonl'))).verification).toMatchObject({ ok: false, firstBadSeq: 3, reason: 'hash_mismatch' });
  });
});
