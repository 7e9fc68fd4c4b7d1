import { createReadStream } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { awkwardName, awkwardText, foreignJson } from '@cairn/testing';
import { formatVerifierKey, generateSigner } from '@cairn/transparency';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';
import type { RunOutcome, RunView } from './stack.harness.js';

/*
 * A run whose receipts carry U+2028, U+2029, a lone "\r" and every control character the contracts
 * let through (all but NUL in argv, env values, file content and the claim; U+2028/U+2029 in the
 * run's name and in file names, which refuse control characters), on a real stack: the chain file
 * `cairn export` writes, what `cairn events --json` prints and the proof bundle all verify, and so
 * do the same receipts written by another producer (raw separators, CRLF line ends).
 */

const NAME = awkwardName();
const TEXT = awkwardText();
const OUT_FILE = `/out/${NAME}.txt`;

let stack: TestStack;
let outcome: RunOutcome;
let run: RunView;

/** Lines as Node's readline reads them, the reader that split a raw U+2028 (issue 13). */
async function readlineLines(path: string): Promise<string[]> {
  const lines: string[] = [];
  for await (const line of createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Infinity })) lines.push(line);
  return lines;
}

const parsed = (text: string) => text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as Record<string, unknown>);

beforeAll(async () => {
  stack = await TestStack.create('awkward-e2e');
  await stack.up();
  const spec = await stack.specFile('awkward', {
    name: NAME,
    image: 'cairn/sandbox-busybox:1',
    files: [{ path: `/work/${NAME}.txt`, content: TEXT }],
    steps: [
      {
        argv: ['sh', '-c', `cat '/work/${NAME}.txt' && printf '%s' "$1" > '${OUT_FILE}' && : > "/out/bad$(printf '\\001')name"`, 'sh', TEXT],
        env: { AWKWARD: TEXT },
      },
    ],
    outputs: ['/out'],
    caps: { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 },
    network: 'none',
    checks: [{ id: 'echoes', source: 'steps[0].stdout', op: 'contains', value: TEXT, weight: 1 }],
    claim: { statement: TEXT, checks: [{ id: 'wrote', source: `artifacts["${OUT_FILE}"]`, op: 'exists' }] },
  });
  const cli = await stack.cairn(['run', spec, '--wait', '--json']);
  try {
    outcome = JSON.parse(cli.stdout) as RunOutcome;
  } catch {
    throw new Error(`cairn run printed no JSON (exit ${cli.code}):\n${cli.stdout}\n${cli.stderr}\n${await stack.logs()}`);
  }
  run = await stack.waitForRun(outcome.runId, (view) => view.sealed);
}, 180_000);

afterAll(async () => {
  await stack?.dispose();
}, 120_000);

describe('a run whose receipts hold U+2028, U+2029 and control characters', () => {
  it('runs to its seal with the text recorded as given', async () => {
    expect(outcome).toMatchObject({ state: 'SEALED', verdict: 'SUPPORTS', score: 1, maxScore: 1, errorCode: null });
    expect(run.name).toBe(NAME);
    const response = await stack.api(`/v1/runs/${outcome.runId}/events?after=0&limit=1000`);
    const receipts = ((await response.json()) as { items: Record<string, unknown>[] }).items;
    const byType = (type: string) => receipts.find((receipt) => receipt.type === type) ?? {};
    const submitted = byType('run.submitted') as { spec: { name: string; files: { path: string; content: string }[]; claim: { statement: string } } };
    expect(submitted.spec.name).toBe(NAME);
    expect(submitted.spec.files[0]).toMatchObject({ path: `/work/${NAME}.txt`, content: TEXT });
    expect(submitted.spec.claim.statement).toBe(TEXT);
    const started = receipts.filter((receipt) => receipt.type === 'step.started').map((receipt) => receipt.argv as string[]);
    expect(started).toContainEqual(['sh', '-c', expect.stringContaining(NAME) as string, 'sh', TEXT]);
    // The file named with U+2028/U+2029 is collected; the one with a control character is not (output-names.ts).
    expect(Object.keys(byType('run.executed').artifact_hashes as Record<string, string>)).toContain(OUT_FILE);
    expect(byType('run.executed')).toMatchObject({ outputs_skipped: 1 });
  });

  it("the exported file's seal verifies with the key the stack publishes (--key, --trust-file), and not with another of the same name", async () => {
    const file = join(stack.home, `${outcome.runId}.signed.jsonl`);
    expect((await stack.cairn(['export', outcome.runId, '-o', file])).code).toBe(0);
    const published = await stack.api('/.well-known/cairn/keys');
    expect(published.status).toBe(200);
    const { keys } = (await published.json()) as { keys: { key: string; name: string; status: string }[] };
    expect(keys.map((k) => k.status)).toEqual(['current']);
    const trusted = keys[0]!.key;
    const withKey = await stack.cairn(['verify', file, '--key', trusted, '--json']);
    expect(withKey.code, withKey.stdout + withKey.stderr).toBe(0);
    expect(JSON.parse(withKey.stdout)).toMatchObject({ ok: true, chainId: outcome.runId, seal: { signed: true, verified: true, key: trusted.split('+').slice(0, 2).join('+') } });
    const trustFile = join(stack.home, 'trusted-keys');
    await writeFile(trustFile, `${trusted}\n`);
    expect((await stack.cairn(['verify', file, '--trust-file', trustFile, '--json'])).code).toBe(0);

    // Same name, another key: its id differs, so the seal names a key nobody trusts.
    const { signer } = await generateSigner(keys[0]!.name);
    const other = await formatVerifierKey(signer.name, signer.publicKey);
    const refused = await stack.cairn(['verify', file, '--key', other, '--json']);
    expect(refused.code).toBe(1);
    expect(refused.stdout + refused.stderr).toContain('seal_key_unknown');
  });

  it('`cairn export` writes U+2028/U+2029 escaped, one receipt per line even for readline, and `cairn verify` takes the file', async () => {
    const file = join(stack.home, `${outcome.runId}.jsonl`);
    const exported = await stack.cairn(['export', outcome.runId, '-o', file]);
    expect(exported.code, exported.stderr).toBe(0);
    const text = await readFile(file, 'utf8');
    expect(text).not.toMatch(/[\u2028\u2029]/);
    expect(text).toContain('sep\\u2028ara\\u2029tors');
    expect(await readlineLines(file)).toHaveLength(run.eventCount);
    expect(parsed(text).find((receipt) => receipt.type === 'run.submitted')).toMatchObject({ spec: { name: NAME } });

    const verified = await stack.cairn(['verify', file, '--json']);
    expect(verified.code, verified.stdout).toBe(0);
    // Signed by the stack's seal key; no key was given to check it with (ADR 0017).
    const seal = { signed: true, verified: false, key: expect.stringMatching(/^cairn\/.+\+[0-9a-f]{8}$/) as string };
    expect(JSON.parse(verified.stdout)).toEqual({ ok: true, chainId: outcome.runId, count: run.eventCount, headHash: run.headHash, seal });

    // To stdout: the same bytes.
    const toStdout = await stack.cairn(['export', outcome.runId]);
    expect(toStdout.stdout).toBe(text);
  });

  it('the same receipts written raw (JSON.stringify, as cairn export did before) or by another producer (raw, CRLF) verify to the same head', async () => {
    const receipts = parsed(await readFile(join(stack.home, `${outcome.runId}.jsonl`), 'utf8'));
    const forms = {
      'raw.jsonl': receipts.map((receipt) => `${JSON.stringify(receipt)}\n`).join(''),
      'foreign.jsonl': receipts.map((receipt) => `${foreignJson(receipt)}\n`).join(''),
      'foreign-crlf.jsonl': receipts.map((receipt) => `${foreignJson(receipt)}\r\n`).join(''),
    };
    for (const [name, content] of Object.entries(forms)) {
      expect(content, name).toMatch(/\u2028/);
      const path = join(stack.home, name);
      await writeFile(path, content);
      const verified = await stack.cairn(['verify', path, '--json']);
      expect({ name, code: verified.code }).toEqual({ name, code: 0 });
      expect(JSON.parse(verified.stdout)).toMatchObject({ count: run.eventCount, headHash: run.headHash });
    }
  });

  it('`cairn events --json` prints the receipts escaped: a chain file that verifies', async () => {
    const events = await stack.cairn(['events', outcome.runId, '--json']);
    expect(events.code, events.stderr).toBe(0);
    expect(events.stdout).not.toMatch(/[\u2028\u2029]/);
    const path = join(stack.home, 'events.jsonl');
    await writeFile(path, events.stdout);
    expect(await readlineLines(path)).toHaveLength(run.eventCount);
    const verified = await stack.cairn(['verify', path, '--json']);
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, count: run.eventCount, headHash: run.headHash });
  });

  it("the run's proof bundle verifies from the stack and from its file, escaped or rewritten with raw separators", async () => {
    const bundleFile = join(stack.home, 'awkward.bundle.json');
    const fetched = await stack.cairn(['verify', outcome.runId, '-o', bundleFile, '--json']);
    expect(fetched.code, fetched.stdout).toBe(0);
    expect(JSON.parse(fetched.stdout)).toMatchObject({ ok: true, chainId: outcome.runId, headHash: run.headHash, verdict: 'SUPPORTS' });
    const text = await readFile(bundleFile, 'utf8');
    expect(text).not.toMatch(/[\u2028\u2029]/);
    const offline = await stack.cairn(['verify', bundleFile, '--json']);
    expect(JSON.parse(offline.stdout)).toMatchObject({ ok: true, headHash: run.headHash, verdict: 'SUPPORTS' });

    const rawFile = join(stack.home, 'awkward.raw.bundle.json');
    await writeFile(rawFile, foreignJson(JSON.parse(text)));
    expect(await readFile(rawFile, 'utf8')).toMatch(/\u2028/);
    const raw = await stack.cairn(['verify', rawFile, '--json']);
    expect(JSON.parse(raw.stdout)).toMatchObject({ ok: true, headHash: run.headHash, verdict: 'SUPPORTS' });
  });
});
