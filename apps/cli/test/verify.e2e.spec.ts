import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jsonLine, sealReceipt } from '@cairn/evidence';
import { awkwardName, awkwardText, foreignJson } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCairn, sampleChain, toJsonLines } from './cli.harness.js';

const CHAIN = 'run_verify-e2e';
let dir: string;
let receipts: Record<string, unknown>[];
let headHash: string;

async function file(name: string, content: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, content);
  return path;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-verify-e2e-'));
  receipts = sampleChain(CHAIN, 6);
  headHash = String(receipts[5]!.hash);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('cairn verify <chain file>', () => {
  it('verifies a good chain: exit 0 and the head hash', async () => {
    const run = await runCairn(['verify', await file('good.jsonl', toJsonLines(receipts))]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`OK  6 receipts  chain ${CHAIN}  head ${headHash}\n`);
  });

  it('accepts a file without a trailing newline, and CRLF line ends', async () => {
    const noNewline = await runCairn(['verify', await file('no-newline.jsonl', toJsonLines(receipts).trimEnd())]);
    expect(noNewline.code).toBe(0);
    const crlf = await runCairn(['verify', await file('crlf.jsonl', toJsonLines(receipts).replaceAll('\n', '\r\n'))]);
    expect(crlf.code).toBe(0);
    expect(crlf.stdout).toContain(`head ${headHash}`);
  });

  it('prints { ok, chainId, count, headHash } with --json', async () => {
    const run = await runCairn(['verify', await file('good-json.jsonl', toJsonLines(receipts)), '--json']);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ ok: true, chainId: CHAIN, count: 6, headHash });
  });

  it('fails a chain whose receipts verify but which records its own break (ADR 0033): E_CHAIN_BROKEN break_recorded at the alert, exit 1', async () => {
    const message = `the message at stream seq 30 on cairn.evidence.${CHAIN}.step.completed, after seq 3, is not a receipt (not JSON); it is no part of the hash chain`;
    const withAlert = (severity: string) => {
      const head = receipts.slice(0, 3);
      const alert = sealReceipt(String(head[2]!.hash), { v: 1, seq: 4, run_id: CHAIN, tenant: 'default', type: 'alert.raised', actor: 'runtime', ts: '2026-01-01T00:00:04.000Z', causation: `${CHAIN}:3`, severity, error_code: 'E_CHAIN_BROKEN', message });
      const failed = sealReceipt(alert.hash, { v: 1, seq: 5, run_id: CHAIN, tenant: 'default', type: 'run.failed', actor: 'runtime', ts: '2026-01-01T00:00:05.000Z', causation: `${CHAIN}:4`, error_code: 'E_CHAIN_BROKEN', message });
      return [...head, alert, failed];
    };
    const run = await runCairn(['verify', await file('break-recorded.jsonl', toJsonLines(withAlert('critical')))]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(`error E_CHAIN_BROKEN: the receipts verify, but the chain records at seq 4 that it was broken: ${message}\n`);
    const bundle = await runCairn(['verify', await file('break-recorded.json', JSON.stringify({ format: 'cairn.bundle/v1', runId: CHAIN, receipts: withAlert('critical') })), '--json']);
    expect(bundle.code).toBe(1);
    expect(JSON.parse(bundle.stdout)).toMatchObject({ ok: false, error: { code: 'E_CHAIN_BROKEN', details: { firstBadSeq: 4, reason: 'break_recorded' } } });
    // A warning is no recorded break: the chain verifies.
    const warned = await runCairn(['verify', await file('break-warned.jsonl', toJsonLines(withAlert('warning'))), '--json']);
    expect(warned.code).toBe(0);
    expect(JSON.parse(warned.stdout)).toMatchObject({ ok: true, count: 5 });
  });

  it('fails a tampered field with E_CHAIN_BROKEN at its seq, exit 1', async () => {
    const tampered = receipts.map((r) => (r.seq === 4 ? { ...r, exit_code: 1 } : r));
    const run = await runCairn(['verify', await file('tampered.jsonl', toJsonLines(tampered))]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^error E_CHAIN_BROKEN: chain broken at seq 4 \(hash_mismatch\): /);
    expect(run.stderr).not.toContain('    at ');
  });

  it('fails a tampered field with the JSON error shape under --json', async () => {
    const tampered = receipts.map((r) => (r.seq === 2 ? { ...r, argv: ['rm', '-rf', '/'] } : r));
    const run = await runCairn(['--json', 'verify', await file('tampered-json.jsonl', toJsonLines(tampered))]);
    expect(run.code).toBe(1);
    const body = JSON.parse(run.stdout) as { ok: boolean; error: { code: string; message: string; details: unknown } };
    expect(body).toEqual({
      ok: false,
      error: { code: 'E_CHAIN_BROKEN', message: expect.stringContaining('seq 2') as string, details: { firstBadSeq: 2, reason: 'hash_mismatch' } },
    });
  });

  it('fails a deleted line at the position of the missing receipt', async () => {
    const run = await runCairn(['verify', await file('deleted.jsonl', toJsonLines(receipts.filter((r) => r.seq !== 3))), '--json']);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: false, error: { code: 'E_CHAIN_BROKEN', details: { firstBadSeq: 3, reason: 'seq_out_of_order' } } });
  });

  it('fails a re-sealed receipt (hash recomputed over a changed body) at the next seq', async () => {
    const { hash: _h, prev_hash: _p, ...body } = receipts[2]!;
    const forged = sealReceipt(String(receipts[2]!.prev_hash), { ...body, exit_code: 0, stage: 'forged' });
    const chain = receipts.map((r) => (r.seq === 3 ? forged : r));
    const run = await runCairn(['verify', await file('forged.jsonl', toJsonLines(chain)), '--json']);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ error: { details: { firstBadSeq: 4, reason: 'prev_hash_mismatch' } } });
  });

  it('breaks the chain at a line that is not JSON', async () => {
    const lines = toJsonLines(receipts).split('\n');
    lines[1] = '{"seq": 2, this is not json';
    const run = await runCairn(['verify', await file('not-json.jsonl', lines.join('\n'))]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^error E_CHAIN_BROKEN: chain broken at seq 2 \(malformed\): line 2 is not JSON/);
  });

  it('breaks the chain at a blank line inside it', async () => {
    const lines = toJsonLines(receipts).split('\n');
    lines.splice(3, 0, '');
    const run = await runCairn(['verify', await file('blank.jsonl', lines.join('\n')), '--json']);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ error: { details: { firstBadSeq: 4, reason: 'malformed' } } });
  });

  it('fails an empty file: a chain holds at least one receipt', async () => {
    for (const content of ['', '\n', '  \n\n']) {
      const run = await runCairn(['verify', await file('empty.jsonl', content), '--json']);
      expect(run.code).toBe(1);
      expect(JSON.parse(run.stdout)).toMatchObject({ error: { code: 'E_CHAIN_BROKEN', details: { firstBadSeq: 1, reason: 'empty' } } });
    }
  });
});

describe('cairn verify <proof bundle>', () => {
  const bundle = (extra: Record<string, unknown> = {}) => ({ format: 'cairn.bundle/v1', chainId: CHAIN, receipts, ...extra });

  it('verifies the receipts of a bundle, one-line or pretty-printed', async () => {
    for (const [name, text] of [
      ['bundle-line.json', JSON.stringify(bundle())],
      ['bundle-pretty.json', `\n${JSON.stringify(bundle(), null, 2)}\n`],
    ] as const) {
      const run = await runCairn(['verify', await file(name, text)]);
      expect(run.code, name).toBe(0);
      expect(run.stdout).toBe(`OK  6 receipts  chain ${CHAIN}  head ${headHash}  (proof bundle)\n`);
    }
  });

  it('fails a bundle with a tampered receipt', async () => {
    const tampered = receipts.map((r) => (r.seq === 5 ? { ...r, actor: 'someone-else' } : r));
    const run = await runCairn(['verify', await file('bundle-bad.json', JSON.stringify(bundle({ receipts: tampered }), null, 2)), '--json']);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ error: { code: 'E_CHAIN_BROKEN', details: { firstBadSeq: 5, reason: 'hash_mismatch' } } });
  });

  it('refuses an unknown bundle version or a bundle without receipts as bad input, exit 2', async () => {
    const v9 = await runCairn(['verify', await file('bundle-v9.json', JSON.stringify(bundle({ format: 'cairn.bundle/v9' })))]);
    expect(v9.code).toBe(2);
    expect(v9.stderr).toMatch(/^error E_INPUT: .*unsupported proof bundle format "cairn.bundle\/v9"/);
    const noReceipts = await runCairn(['verify', await file('bundle-empty.json', JSON.stringify({ format: 'cairn.bundle/v1' }))]);
    expect(noReceipts.code).toBe(2);
  });

  it('fails a bundle whose receipts array is empty', async () => {
    const run = await runCairn(['verify', await file('bundle-none.json', JSON.stringify(bundle({ receipts: [] })))]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('E_CHAIN_BROKEN');
  });
});

describe('cairn verify: strings holding U+2028, U+2029, a lone "\\r" and every control character', () => {
  const AWKWARD_CHAIN = 'run_verify-awkward';
  const text = awkwardText({ nul: true });
  let awkward: Record<string, unknown>[];
  let awkwardHead: string;

  beforeAll(() => {
    // Each receipt carries the text where receipts carry text: argv, a name, file names, a claim.
    awkward = [];
    let prev = '0'.repeat(64);
    for (let seq = 1; seq <= 5; seq += 1) {
      const receipt = sealReceipt(prev, {
        v: 1,
        seq,
        run_id: AWKWARD_CHAIN,
        tenant: 'default',
        type: seq === 1 ? 'run.submitted' : 'step.completed',
        actor: seq === 1 ? 'intake' : 'runtime',
        ts: new Date(Date.UTC(2026, 11, 1, 0, 0, seq)).toISOString(),
        causation: seq === 1 ? null : `${AWKWARD_CHAIN}:${seq - 1}`,
        ...(seq === 1
          ? { spec: { name: awkwardName(), steps: [{ argv: ['sh', '-c', text] }], files: [{ path: `/work/${awkwardName()}`, content: text }], claim: { statement: text } } }
          : { argv: ['echo', text, String(seq)], exit_code: 0, artifact_hashes: { [`/out/${awkwardName()}`]: 'a'.repeat(64) } }),
      });
      awkward.push(receipt);
      prev = receipt.hash;
    }
    awkwardHead = String(awkward[4]!.hash);
  });

  it('verifies the chain file Cairn writes (U+2028/U+2029 escaped), as JSON.stringify writes it (raw), and as another producer does (raw, LF or CRLF)', async () => {
    const forms = {
      'cairn.jsonl': awkward.map(jsonLine).join(''),
      'stringify.jsonl': toJsonLines(awkward),
      'foreign-lf.jsonl': awkward.map((r) => `${foreignJson(r)}\n`).join(''),
      'foreign-crlf.jsonl': awkward.map((r) => `${foreignJson(r)}\r\n`).join(''),
    };
    expect(forms['cairn.jsonl']).not.toMatch(/[\u2028\u2029]/);
    for (const raw of [forms['stringify.jsonl'], forms['foreign-lf.jsonl']]) expect(raw).toMatch(/\u2028[^]*\u2029/);
    for (const [name, content] of Object.entries(forms)) {
      const run = await runCairn(['verify', await file(name, content)]);
      expect({ name, code: run.code, stderr: run.stderr }).toEqual({ name, code: 0, stderr: '' });
      expect(run.stdout).toBe(`OK  5 receipts  chain ${AWKWARD_CHAIN}  head ${awkwardHead}\n`);
    }
  });

  it('verifies a proof bundle holding them: one line raw or escaped, or pretty-printed', async () => {
    const document = { format: 'cairn.bundle/v1', runId: AWKWARD_CHAIN, headHash: awkwardHead, receipts: awkward };
    for (const [name, content] of [
      ['awkward-bundle-foreign.json', foreignJson(document)],
      ['awkward-bundle-escaped.json', jsonLine(document)],
      ['awkward-bundle-pretty.json', JSON.stringify(document, null, 2)],
    ] as const) {
      const run = await runCairn(['verify', await file(name, content)]);
      expect({ name, code: run.code, stderr: run.stderr }).toEqual({ name, code: 0, stderr: '' });
      expect(run.stdout).toBe(`OK  5 receipts  chain ${AWKWARD_CHAIN}  head ${awkwardHead}  (proof bundle)\n`);
    }
  });

  it('still fails such a chain where one separator was swapped for the other', async () => {
    const swapped = awkward.map((r) => (r.seq === 3 ? { ...r, argv: ['echo', text.replace('\u2028', '\u2029'), '3'] } : r));
    const run = await runCairn(['verify', await file('awkward-swapped.jsonl', swapped.map((r) => `${foreignJson(r)}\n`).join('')), '--json']);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ error: { code: 'E_CHAIN_BROKEN', details: { firstBadSeq: 3, reason: 'hash_mismatch' } } });
  });
});

describe('cairn usage errors exit 2', () => {
  it('no arguments', async () => {
    const run = await runCairn([]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('Usage: cairn');
  });

  it('an unknown command', async () => {
    const run = await runCairn(['frobnicate']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^error E_INPUT: unknown command 'frobnicate'/);
  });

  it('a missing file, and a directory, with E_INPUT', async () => {
    const missing = await runCairn(['verify', join(dir, 'nope.jsonl')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe(`error E_INPUT: cannot read ${join(dir, 'nope.jsonl')}: ENOENT\n`);
    const directory = await runCairn(['verify', dir, '--json']);
    expect(directory.code).toBe(2);
    expect(JSON.parse(directory.stdout)).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
  });

  it('--help and --version exit 0', async () => {
    const help = await runCairn(['verify', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: cairn verify [options] <run-id | file>');
    const version = await runCairn(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
  });
});
