import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { isolatedNames } from '@cairn/config';
import { jsonLine } from '@cairn/evidence';
import { awkwardName, awkwardText, foreignJson, testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { parsePolicy, policyVersion } from '@cairn/policy';
import { formatVerifierKey, generateSigner } from '@cairn/transparency';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumPath, DashboardStack } from './dashboard-stack.harness.js';
import type { Key } from './dashboard-stack.harness.js';

/*
 * The admin dashboard in a real browser (Debian's Chromium driven by playwright-core) against a
 * whole isolated stack on the real NATS, PostgreSQL and Docker engine: sign in, watch a run go
 * from SUBMITTED to SEALED live, read its timeline, approve a held run from the queue, see a
 * tampered chain turn the badge red, move through the runs table with the keyboard.
 * CAIRN_DASHBOARD_SCREENSHOTS=<dir> saves a screenshot of each main page there (docs/dashboard/).
 */

const exec = promisify(execFile);
const SMALL = { wallSeconds: 30, memoryMiB: 64, pids: 32, diskMiB: 16, cpus: 0.5 };
const HELD = `cairn/sandbox-busybox:held-${uniqueName('d').toLowerCase().replace(/[^a-z0-9]/g, '')}`;
const SCREENSHOTS = process.env.CAIRN_DASHBOARD_SCREENSHOTS;
const POLICY = {
  version: 1,
  defaultImage: 'cairn/sandbox-busybox:1',
  images: { allow: [{ name: 'cairn/sandbox-busybox:1' }, { name: HELD }] },
  caps: { defaults: { wallSeconds: 60, memoryMiB: 256, pids: 64, diskMiB: 256, cpus: 1 }, max: { wallSeconds: 600, memoryMiB: 4096, pids: 256, diskMiB: 8192, cpus: 4 } },
  network: { egress: 'deny' },
  approvals: { rules: [{ when: 'apply_step', timeoutSeconds: 300 }, { when: { image: HELD }, timeoutSeconds: 300 }] },
  budgets: { runsPerJob: 6, jobMinutes: 90 },
};

let stack: DashboardStack;
let policyDir: string;
let submitter: Key;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const requestUrls: string[] = [];
const cspViolations: string[] = [];
/** The run watched live: its id, once sealed. */
let liveRunId = '';
/** The held run, approved and sealed after the live one (so its leaf is not the log's first: its proof has hashes). */
let heldRunId = '';
/** The held run's cairn.bundle/v2, as the proof panel saved it. */
let bundleFile = '';

async function screenshot(name: string, fullPage = false): Promise<void> {
  if (SCREENSHOTS === undefined || SCREENSHOTS === '') return;
  await mkdir(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage });
}

const dashboard = (path = '') => `${stack.url}/dashboard/${path}`;
/** How long a page may take to show something (a shared CI machine can be slow; vitest's default is 1 s). */
const SOON = { timeout: 15_000, interval: 100 };

/** An attribute of every element a locator matches, in document order. */
async function attributes(locator: Locator, name: string): Promise<(string | null)[]> {
  return Promise.all((await locator.all()).map((element) => element.getAttribute(name)));
}

beforeAll(async () => {
  policyDir = await mkdtemp(join(tmpdir(), 'cairn-dashboard-policy-'));
  const policyFile = join(policyDir, 'policy.json');
  await writeFile(policyFile, JSON.stringify(POLICY));
  stack = await DashboardStack.create('dashboard-e2e', { CAIRN_POLICY_FILE: policyFile, CAIRN_HEARTBEAT_MS: '500', CAIRN_APPROVAL_SCAN_INTERVAL_MS: '200', CAIRN_GRADER_TEARDOWN_GRACE_MS: '3000' });
  await stack.up();
  // The held image is the busybox image under another tag: the worker reports it at its next heartbeat.
  await exec('docker', ['tag', 'cairn/sandbox-busybox:1', HELD]);
  submitter = await stack.mintKey('default', ['runs:read', 'runs:write']);
  browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light', reducedMotion: 'reduce' });
  page = await context.newPage();
  page.on('request', (request) => requestUrls.push(request.url()));
  page.on('console', (message) => {
    if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
  });
}, 180_000);

afterAll(async () => {
  await browser?.close().catch(() => undefined);
  await stack?.dispose();
  await exec('docker', ['rmi', HELD]).catch(() => undefined);
  if (policyDir !== undefined) await rm(policyDir, { recursive: true, force: true });
}, 120_000);

describe('the admin dashboard in Chromium', () => {
  it('is served by the gateway with a strict CSP, and signs in with an API key kept in sessionStorage only', async () => {
    const response = await page.goto(dashboard());
    expect(response?.status()).toBe(200);
    const headers = response?.headers() ?? {};
    expect(headers['content-security-policy']).toContain("script-src 'self'");
    expect(headers['content-security-policy']).not.toContain('unsafe-inline');
    expect(headers['content-type']).toBe('text/html; charset=utf-8');

    const field = page.getByLabel('API key');
    await expect.poll(() => field.isVisible(), SOON).toBe(true);
    await screenshot('sign-in');
    await field.fill('not-a-key');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('alert').textContent(), SOON).toContain('not a Cairn API key');
    // Well formed but unknown: the gateway's own answer is shown.
    await field.fill(`cairn_abcdefgh_${'A'.repeat(43)}`);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('alert').textContent(), SOON).toContain('E_UNAUTHORIZED');

    await field.fill(stack.admin.key);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('heading', { name: 'Runs' }).isVisible(), SOON).toBe(true);
    expect(await page.evaluate('sessionStorage.getItem("cairn.apiKey")')).toBe(stack.admin.key);
    expect(await page.evaluate('localStorage.length')).toBe(0);
  });

  it('shows a run go from SUBMITTED to SEALED live, with the chain verified in the browser', async () => {
    const runId = await stack.submit(stack.admin, {
      name: 'dashboard: live run',
      image: 'cairn/sandbox-busybox:1',
      steps: [{ argv: ['sh', '-c', 'sleep 3; echo hello | tee /out/hello.txt'] }, { argv: ['sh', '-c', 'echo bye; exit 3'] }],
      outputs: ['/out'],
      caps: SMALL,
      network: 'none',
      checks: [{ id: 'greets', source: 'steps[0].stdout', op: 'contains', value: 'hello', weight: 1 }],
    });
    let navigations = 0;
    const count = (frame: { parentFrame(): unknown }) => {
      if (frame.parentFrame() === null) navigations += 1;
    };
    page.on('framenavigated', count);
    await page.goto(dashboard(`runs/${runId}`));
    // The page opened while the run was still going: what follows arrived over the stream.
    await expect.poll(() => page.locator('[data-opened-unsealed]').getAttribute('data-opened-unsealed'), SOON).toBe('true');
    await expect.poll(() => page.locator('[data-live]').getAttribute('data-live'), { timeout: 60_000 }).toBe('ended');
    page.off('framenavigated', count);
    expect(navigations).toBe(1);

    const states = await attributes(page.locator('.lifecycle li'), 'data-state');
    expect(states[0]).toBe('SUBMITTED');
    expect(states.at(-1)).toBe('SEALED');
    for (const state of ['SCHEDULED', 'RUNNING', 'EXECUTED', 'VERIFIED']) expect(states).toContain(state);
    await expect.poll(() => page.locator('.page-header [data-state]').first().getAttribute('data-state'), SOON).toBe('SEALED');

    const run = (await (await stack.api(stack.admin, `/v1/runs/${runId}`)).json()) as { headHash: string; eventCount: number };
    const badge = page.locator('[data-chain]');
    await expect.poll(() => badge.getAttribute('data-chain'), SOON).toBe('verified');
    expect(await badge.getAttribute('title')).toBe(`head ${run.headHash}`);
    expect(await badge.textContent()).toContain(`${run.eventCount} receipts`);
    // This stack runs with tracing off: the run was submitted in no trace, and the Trace card says so.
    expect(run).not.toHaveProperty('traceId');
    const trace = page.locator('[data-trace-id]');
    expect(await trace.getAttribute('data-trace-id')).toBe('');
    expect(await trace.textContent()).toBe('not traced');
    liveRunId = runId;
    await screenshot('run', true);
  });

  it("opens the run's timeline: argv, exit codes, durations, artifacts", async () => {
    expect(liveRunId).not.toBe('');
    const receipts = await stack.receipts(stack.admin, liveRunId);
    const items = page.locator('.timeline [data-type]');
    expect(await attributes(items, 'data-type')).toEqual(receipts.map((r) => r.type));

    const first = page.locator('tr[data-step="0"]');
    const second = page.locator('tr[data-step="1"]');
    expect(await first.locator('.argv').textContent()).toBe("sh -c 'sleep 3; echo hello | tee /out/hello.txt'");
    expect(await first.locator('[data-exit-code]').getAttribute('data-exit-code')).toBe('0');
    expect(await second.locator('[data-exit-code]').getAttribute('data-exit-code')).toBe('3');
    const completed = receipts.filter((r) => r.type === 'step.completed');
    // The first step slept 3 s: its duration reads in seconds, as its receipt says.
    expect(completed[0]?.duration_ms).toBeGreaterThanOrEqual(3000);
    expect(await first.locator('td').nth(3).textContent()).toMatch(/^\d+\.\d+ s$/);
    expect(await page.getByRole('table', { name: 'Artifacts' }).textContent()).toContain('/out/hello.txt');

    // A receipt's fields open on demand, not as a wall of JSON.
    const sealed = page.locator('.timeline [data-type="run.sealed"]');
    await sealed.locator('summary').click();
    expect(await sealed.locator('dl').textContent()).toContain('final_state');
  });

  it("shows what the run's steps printed and the files it wrote, read through @cairn/sdk and checked in the browser", async () => {
    expect(liveRunId).not.toBe('');
    const stdout = page.locator('[data-step-output="0.stdout"]');
    await stdout.locator('summary').click();
    await expect.poll(() => stdout.locator('.output-text').textContent(), SOON).toBe('hello\n');
    expect(await stdout.textContent()).toContain('checked in this browser');
    const bye = page.locator('[data-step-output="1.stdout"]');
    await bye.locator('summary').click();
    await expect.poll(() => bye.locator('.output-text').textContent(), SOON).toBe('bye\n');
    const file = page.locator('[data-artifact-output="/out/hello.txt"]');
    await file.locator('summary').click();
    await expect.poll(() => file.locator('.output-text').textContent(), SOON).toBe('hello\n');
  });

  it('approves a held run from the approvals queue', async () => {
    await new Promise((resolve) => setTimeout(resolve, 1200)); // the worker reports the held tag at its next heartbeat
    const runId = await stack.submit(submitter, { name: 'dashboard: held run', image: HELD, steps: [{ argv: ['echo', 'approved'] }], caps: SMALL, network: 'none' });
    await stack.waitForRun(submitter, runId, (run) => run.state === 'AWAITING_APPROVAL');

    await page.goto(dashboard('approvals'));
    const item = page.locator(`li[data-run-id="${runId}"]`);
    await expect.poll(() => item.isVisible(), { timeout: 15_000 }).toBe(true);
    expect(await item.textContent()).toContain('image');
    await screenshot('approvals');
    await item.getByPlaceholder('Comment (optional)').fill('looks fine');
    await item.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => page.locator('.notices').textContent(), SOON).toContain(`Approved image of ${runId}`);

    await stack.waitForRun(submitter, runId, (run) => run.sealed);
    heldRunId = runId;
    const granted = (await stack.receipts(submitter, runId)).find((r) => r.type === 'approval.granted');
    expect(granted).toMatchObject({ approved_by: `key:${stack.admin.id}`, comment: 'looks fine' });
    // The queue refreshes by itself: the decided run leaves it.
    await expect.poll(() => item.count(), { timeout: 15_000 }).toBe(0);
  });

  it("checks a sealed run's proofs in the browser, and turns red the one line whose proof was changed in transit", async () => {
    // Two seals in the log (the live run's, then the held run's): the held run's path has a hash to change.
    expect(liveRunId).not.toBe('');
    expect(heldRunId).not.toBe('');
    const lineOf = (name: string) => page.locator(`[data-proof-line="${name}"]`);
    const lines = () => Promise.all(['chain', 'signature', 'checkpoint', 'leaf', 'inclusion'].map(async (name) => `${name}:${await lineOf(name).getAttribute('data-status')}`));
    const verifiedAll = ['chain:verified', 'signature:verified', 'checkpoint:verified', 'leaf:verified', 'inclusion:verified'];
    await page.goto(dashboard(`runs/${heldRunId}`));
    const panel = page.locator('[data-proof]');
    await expect.poll(() => panel.getAttribute('data-proof'), { timeout: 45_000, interval: 200 }).toBe('verified');
    expect(await lines()).toEqual(verifiedAll);
    expect(await lineOf('signature').textContent()).toMatch(/Seal signature: verified — signed by \S+\+[0-9a-f]{8}/);
    const served = (await (await stack.api(stack.admin, `/v1/tlog/proof/inclusion?chain=${heldRunId}`)).json()) as { hashes: string[]; treeSize: number; leafIndex: number };
    expect(served.hashes.length).toBeGreaterThan(0);
    expect(await lineOf('inclusion').textContent()).toContain(`leaf ${served.leafIndex} of`);
    await screenshot('proof', true);

    // The bundle the panel checked, saved as a file (for `cairn verify` or the offline page below).
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: /Download the bundle/ }).click()]);
    expect(download.suggestedFilename()).toBe(`${heldRunId}.bundle.json`);
    bundleFile = join(policyDir, download.suggestedFilename());
    await download.saveAs(bundleFile);

    const flip = (base64: string, at: number) => {
      const raw = Buffer.from(base64, 'base64');
      raw[at] = raw[at]! ^ 1;
      return raw.toString('base64');
    };
    const tampered = async (change: (proof: { hashes: string[]; checkpoint: string }) => void) => {
      await page.unrouteAll();
      await page.route(
        (url) => url.pathname === '/v1/tlog/proof/inclusion',
        async (route) => {
          const response = await route.fetch();
          const proof = (await response.json()) as { hashes: string[]; checkpoint: string };
          change(proof);
          await route.fulfill({ response, json: proof });
        },
      );
      await page.reload();
      await expect.poll(() => panel.getAttribute('data-proof'), { timeout: 45_000, interval: 200 }).toBe('failed');
    };
    try {
      // One byte of one hash of the inclusion path.
      await tampered((proof) => {
        proof.hashes[0] = flip(proof.hashes[0]!, 5);
      });
      expect(await lines()).toEqual(['chain:verified', 'signature:verified', 'checkpoint:verified', 'leaf:verified', 'inclusion:failed']);
      expect(await lineOf('inclusion').getAttribute('class')).toBe('text-bad');
      expect(await lineOf('inclusion').getAttribute('data-reason')).toBe('inclusion_invalid');
      expect(await lineOf('inclusion').textContent()).toContain('inclusion invalid');
      // One byte of the checkpoint's root hash: its signature no longer holds.
      await tampered((proof) => {
        const note = proof.checkpoint.split('\n');
        note[2] = flip(note[2]!, 5);
        proof.checkpoint = note.join('\n');
      });
      expect(await lines()).toEqual(['chain:verified', 'signature:verified', 'checkpoint:failed', 'leaf:verified', 'inclusion:skipped']);
      expect(await lineOf('checkpoint').getAttribute('data-reason')).toBe('checkpoint_signature_invalid');
      expect(await lineOf('checkpoint').textContent()).toContain('checkpoint signature invalid');
    } finally {
      await page.unrouteAll();
    }
  });

  it('verifies a bundle file offline on the "Verify a bundle" page, signed out, and names what a changed one breaks', async () => {
    expect(bundleFile).not.toBe('');
    // A fresh tab holds no key: the page needs none.
    const tab = await context.newPage();
    tab.on('request', (request) => requestUrls.push(request.url()));
    try {
      await tab.goto(dashboard('verify'));
      const keys = tab.getByLabel(/Trusted seal keys/);
      await expect.poll(() => keys.inputValue(), SOON).toMatch(/^\S+\+[0-9a-f]{8}\+[A-Za-z0-9+/]{44}/);
      const outcome = tab.locator('[data-verify-outcome]');
      const lines = () => Promise.all(['chain', 'signature', 'checkpoint', 'leaf', 'inclusion'].map(async (name) => `${name}:${await tab.locator(`[data-proof-line="${name}"]`).getAttribute('data-status')}`));
      const before = requestUrls.length;
      await tab.locator('#bundle-file').setInputFiles(bundleFile);
      await expect.poll(() => outcome.getAttribute('data-verify-outcome'), SOON).toBe('verified');
      expect(await lines()).toEqual(['chain:verified', 'signature:verified', 'checkpoint:verified', 'leaf:verified', 'inclusion:verified']);
      // Checked in the tab: the file went nowhere.
      expect(requestUrls.slice(before).filter((url) => !url.includes('/dashboard/'))).toEqual([]);

      const bundle = JSON.parse(await readFile(bundleFile, 'utf8')) as { inclusion: { leafHash: string }; receipts: Record<string, unknown>[] };
      // Dropped on the page, with one receipt changed: the chain breaks there, and nothing after it is vouched for.
      const forged = { ...bundle, receipts: bundle.receipts.map((r) => (r.type === 'step.completed' ? { ...r, exit_code: 7 } : r)) };
      // (In the page's own terms, as a string: this file is compiled without the DOM's types.)
      const dropped = await tab.evaluateHandle(
        `(() => { const t = new DataTransfer(); t.items.add(new File([${JSON.stringify(JSON.stringify(forged))}], 'forged.bundle.json', { type: 'application/json' })); return t; })()`,
      );
      await tab.locator('[data-dropzone]').dispatchEvent('drop', { dataTransfer: dropped });
      await expect.poll(() => tab.locator('[data-proof-line="chain"]').getAttribute('data-reason'), SOON).toBe('hash_mismatch');
      expect(await lines()).toEqual(['chain:failed', 'signature:skipped', 'checkpoint:skipped', 'leaf:skipped', 'inclusion:skipped']);

      // Pasted, with the leaf the log holds replaced by another seal's: the leaf line says so.
      const other = (await (await stack.api(stack.admin, `/v1/tlog/proof/inclusion?chain=${liveRunId}`)).json()) as { leafHash: string };
      await tab.getByLabel(/paste the bundle/).fill(JSON.stringify({ ...bundle, inclusion: { ...bundle.inclusion, leafHash: other.leafHash } }));
      await tab.getByRole('button', { name: 'Check the pasted bundle' }).click();
      await expect.poll(() => tab.locator('[data-proof-line="leaf"]').getAttribute('data-reason'), SOON).toBe('leaf_mismatch');
      expect(await outcome.getAttribute('data-verify-outcome')).toBe('failed');
      // Against a key nobody pinned: both signatures are by an unknown key.
      const { signer: stranger } = await generateSigner('cairn.test/stranger');
      await keys.fill(await formatVerifierKey(stranger.name, stranger.publicKey));
      await tab.getByLabel(/paste the bundle/).fill(JSON.stringify(bundle));
      await tab.getByRole('button', { name: 'Check the pasted bundle' }).click();
      await expect.poll(() => tab.locator('[data-proof-line="signature"]').getAttribute('data-status'), SOON).toBe('failed');
      expect(await tab.locator('[data-proof-line="signature"]').getAttribute('data-reason')).toBe('seal_key_unknown');
      expect(await tab.locator('[data-proof-line="checkpoint"]').getAttribute('data-reason')).toBe('checkpoint_key_unknown');
    } finally {
      await tab.close();
    }
  });

  it('turns the chain badge red when a receipt was changed on its way to the browser', async () => {
    expect(liveRunId).not.toBe('');
    const receipts = await stack.receipts(stack.admin, liveRunId);
    const target = receipts.find((r) => r.type === 'step.completed' && r.exit_code === 3);
    expect(target).toBeDefined();
    // Between the gateway and the page, one field of one receipt is rewritten: exit 3 becomes 0.
    await page.route(
      (url) => url.pathname === `/v1/runs/${liveRunId}/events`,
      async (route) => {
        const response = await route.fetch();
        const page = (await response.json()) as { items: Record<string, unknown>[] };
        for (const receipt of page.items) if (receipt.seq === target?.seq) receipt.exit_code = 0;
        await route.fulfill({ response, json: page });
      },
    );
    try {
      await page.goto(dashboard(`runs/${liveRunId}`));
      const badge = page.locator('[data-chain]');
      await expect.poll(() => badge.getAttribute('data-chain'), SOON).toBe('broken');
      expect(await badge.textContent()).toContain(`receipt #${target?.seq}: hash mismatch`);
      // The page shows the forged value it was given; only the badge tells it is not what was recorded.
      expect(await page.locator('tr[data-step="1"] [data-exit-code]').getAttribute('data-exit-code')).toBe('0');
      await screenshot('tampered');
    } finally {
      await page.unrouteAll();
    }
    await page.reload();
    await expect.poll(() => page.locator('[data-chain]').getAttribute('data-chain'), SOON).toBe('verified');
  });

  it('shows a chain that records its own break as broken at that seq, never verified: live as a poison message stops the run, and stored once sealed', async () => {
    const runId = await stack.submit(submitter, { name: 'dashboard: a poison message mid-run', image: 'cairn/sandbox-busybox:1', steps: [{ argv: ['sleep', '5'] }, { argv: ['echo', 'never'] }], caps: SMALL, network: 'none' });
    await page.goto(dashboard(`runs/${runId}`));
    const badge = page.locator('[data-chain]');
    await expect.poll(async () => (await stack.receipts(submitter, runId)).some((r) => r.type === 'step.started'), { timeout: 60_000, interval: 200 }).toBe(true);
    await expect.poll(() => page.locator('[data-opened-unsealed]').getAttribute('data-opened-unsealed'), SOON).toBe('true');
    await expect.poll(() => badge.getAttribute('data-chain'), SOON).toBe('verified');

    // A message on the run's chain that is no receipt (ADR 0033), from a client that may publish there:
    // the services record the break on the chain, whose receipts all still verify.
    const nc = await connect({ servers: (stack.env.CAIRN_NATS_URL ?? testNatsUrl()).split(',') });
    let streamSeq: number;
    try {
      streamSeq = (await jetstream(nc).publish(`${isolatedNames(stack.stackId).CAIRN_EVIDENCE_SUBJECT_PREFIX}.${runId}.step.completed`, '{"type":"step.completed", not json')).seq;
    } finally {
      await nc.close();
    }
    // Live: the alert arrives over the stream and the badge turns red on it.
    await expect.poll(() => badge.getAttribute('data-chain'), { timeout: 60_000, interval: 100 }).toBe('break-recorded');
    await stack.waitForRun(submitter, runId, (run) => run.sealed);
    const alert = (await stack.receipts(submitter, runId)).find((r) => r.type === 'alert.raised');
    expect(alert).toMatchObject({ severity: 'critical', error_code: 'E_CHAIN_BROKEN', message: expect.stringContaining(`stream seq ${streamSeq}`) as string });
    await expect.poll(() => page.locator('[data-live]').getAttribute('data-live'), { timeout: 60_000 }).toBe('ended');
    expect(await badge.getAttribute('data-chain')).toBe('break-recorded');
    expect(await badge.getAttribute('data-break-seq')).toBe(String(alert!.seq));
    expect(await badge.textContent()).toContain(`the receipts verify, but receipt #${alert!.seq} records that the chain was broken — ${String(alert!.message)}`);

    // Stored: the sealed chain loaded whole, and its proof panel's chain line says the same.
    await page.reload();
    await expect.poll(() => badge.getAttribute('data-chain'), SOON).toBe('break-recorded');
    expect(await page.locator('[data-opened-unsealed]').getAttribute('data-opened-unsealed')).toBe('false');
    expect(await badge.getAttribute('data-break-seq')).toBe(String(alert!.seq));
    await expect.poll(() => page.locator('[data-proof]').getAttribute('data-proof'), { timeout: 45_000, interval: 200 }).toBe('failed');
    const chainLine = page.locator('[data-proof-line="chain"]');
    expect(await chainLine.getAttribute('data-reason')).toBe('break_recorded');
    expect(await chainLine.textContent()).toContain(`receipt #${alert!.seq} records that the chain was broken`);
  });

  it('verifies in the browser a run whose strings hold U+2028, U+2029 and control characters: live and stored, raw or escaped', async () => {
    const text = awkwardText();
    // Held for approval until both tabs have opened it unsealed: a sleep in the step raced the
    // pages' load on a busy machine, and a run sealed before a tab opened it is not watched live.
    // Submitted by another key than the admin's that approves it (a submitter cannot approve its own run).
    const runId = await stack.submit(submitter, {
      name: `dashboard: ${awkwardName()}`,
      image: HELD,
      files: [{ path: `/work/${awkwardName()}.txt`, content: text }],
      steps: [{ argv: ['sh', '-c', 'printf "%s" "$1" > "/out/$2"', 'sh', text, `${awkwardName()}.txt`], env: { AWKWARD: text } }],
      outputs: ['/out'],
      caps: SMALL,
      network: 'none',
      claim: { statement: text, checks: [{ id: 'wrote', source: `artifacts["/out/${awkwardName()}.txt"]`, op: 'exists' }] },
    });
    // A second tab is served the same receipts as another producer would write them: the events
    // page and every SSE data line rewritten with raw U+2028/U+2029 and \u00XX escapes.
    const raw = await context.newPage();
    // sessionStorage is per tab: this one is signed in with the same key before the app loads.
    await raw.addInitScript((key) => sessionStorage.setItem('cairn.apiKey', key), stack.admin.key);
    await raw.route(
      (url) => url.pathname === `/v1/runs/${runId}/events`,
      async (route) => {
        const response = await route.fetch();
        const body = foreignJson(await response.json());
        expect(body).toMatch(/[\u2028\u2029]/);
        await route.fulfill({ response, body });
      },
    );
    await raw.route(
      (url) => url.pathname === `/v1/runs/${runId}/events/stream`,
      async (route) => {
        // Fetched whole (the stream ends after run.sealed), then handed to the page rewritten.
        const response = await route.fetch({ timeout: 60_000 });
        const body = (await response.text()).split('\n').map((line) => (line.startsWith('data: ') ? `data: ${foreignJson(JSON.parse(line.slice(6)))}` : line));
        expect(body.some((line) => line.startsWith('data: ') && /[\u2028\u2029]/.test(line))).toBe(true);
        await route.fulfill({ response, body: body.join('\n') });
      },
    );
    try {
      await Promise.all([page.goto(dashboard(`runs/${runId}`)), raw.goto(dashboard(`runs/${runId}`))]);
      for (const tab of [page, raw]) {
        await expect.poll(() => tab.locator('[data-opened-unsealed]').getAttribute('data-opened-unsealed'), SOON).toBe('true');
      }
      await stack.waitForRun(stack.admin, runId, (run) => run.state === 'AWAITING_APPROVAL');
      const approved = await stack.api(stack.admin, `/v1/runs/${runId}/approvals`, { method: 'POST', body: JSON.stringify({ decision: 'approve' }) });
      expect(approved.status).toBe(202);
      for (const tab of [page, raw]) {
        await expect.poll(() => tab.locator('[data-live]').getAttribute('data-live'), { timeout: 60_000 }).toBe('ended');
      }
      const run = (await (await stack.api(stack.admin, `/v1/runs/${runId}`)).json()) as { headHash: string; eventCount: number; state: string };
      expect(run.state).toBe('SEALED');
      for (const tab of [page, raw]) {
        const badge = tab.locator('[data-chain]');
        await expect.poll(() => badge.getAttribute('data-chain'), SOON).toBe('verified');
        expect(await badge.getAttribute('title')).toBe(`head ${run.headHash}`);
        expect(await badge.textContent()).toContain(`${run.eventCount} receipts`);
      }
      // Stored, as the gateway serves it (raw in JSON), and as Cairn writes JSON Lines (escaped).
      await page.reload();
      await expect.poll(() => page.locator('[data-chain]').getAttribute('data-chain'), SOON).toBe('verified');
      await raw.unrouteAll();
      await raw.route(
        (url) => url.pathname === `/v1/runs/${runId}/events`,
        async (route) => {
          const response = await route.fetch();
          const escaped = jsonLine(await response.json());
          expect(escaped).toContain('\\u2028');
          await route.fulfill({ response, body: escaped });
        },
      );
      await raw.reload();
      await expect.poll(() => raw.locator('[data-chain]').getAttribute('data-chain'), SOON).toBe('verified');
      expect(await raw.locator('[data-chain]').getAttribute('title')).toBe(`head ${run.headHash}`);
    } finally {
      await raw.close();
    }
  });

  it('moves through the runs table with the keyboard and opens a run with Enter', async () => {
    await page.goto(dashboard('runs'));
    const rows = page.locator('tr[data-run-id]');
    await expect.poll(() => rows.count(), SOON).toBeGreaterThanOrEqual(2);
    await screenshot('runs');
    const ids = await attributes(rows, 'data-run-id');
    await page.getByLabel('Created').focus();
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.dataset.runId')).toBe(ids[0]);
    await page.keyboard.press('ArrowDown');
    expect(await page.evaluate('document.activeElement.dataset.runId')).toBe(ids[1]);
    await page.keyboard.press('k');
    expect(await page.evaluate('document.activeElement.dataset.runId')).toBe(ids[0]);
    await page.keyboard.press('End');
    expect(await page.evaluate('document.activeElement.dataset.runId')).toBe(ids.at(-1));
    await page.keyboard.press('Enter');
    await expect.poll(() => new URL(page.url()).pathname, SOON).toBe(`/dashboard/runs/${ids.at(-1)}`);
    await expect.poll(() => page.locator('[data-chain]').getAttribute('data-chain'), SOON).toBe('verified');

    // Filtered by state, through the API's own filter.
    await page.goto(dashboard('runs?state=AWAITING_APPROVAL'));
    await expect.poll(() => page.getByText('No runs match').isVisible(), SOON).toBe(true);
  });

  it('shows the workers with their capacity, the policy in force, and the sandboxes (or their absence) without an error', async () => {
    await page.goto(dashboard('workers'));
    const worker = page.locator(`tr[data-worker-id="${stack.workerId}"]`);
    await expect.poll(() => worker.isVisible(), SOON).toBe(true);
    expect(await worker.textContent()).toContain('healthy');
    await screenshot('workers');

    await page.goto(dashboard('policy'));
    const version = policyVersion(parsePolicy(POLICY));
    await expect.poll(() => page.locator(`[title="${version}"]`).isVisible(), SOON).toBe(true);
    expect(await page.locator('[data-policy-match]').getAttribute('data-policy-match')).toBe('true');
    expect(await page.getByRole('table', { name: 'Approval rules' }).textContent()).toContain(HELD);
    await screenshot('policy');

    await page.goto(dashboard('sandboxes'));
    await expect.poll(async () => (await page.locator('.empty').count()) + (await page.getByRole('table', { name: 'Sandboxes' }).count()), SOON).toBe(1);
    expect(await page.locator('.banner-bad').count()).toBe(0);
  });

  it("opens an interactive sandbox: its execs and files, its chain verified in the browser, its end followed live", async () => {
    const created = await stack.api(stack.admin, '/v1/sandboxes', { method: 'POST', body: JSON.stringify({ image: 'cairn/sandbox-busybox:1', caps: { memoryMiB: 64, pids: 32, diskMiB: 16, cpus: 0.5 }, ttlSeconds: 300 }) });
    const sandbox = (await created.json()) as { id: string; state: string };
    if (created.status === 404) {
      // A gateway built without sandbox sessions: the page says so, as an empty state, not an error.
      await page.goto(dashboard('sandboxes'));
      await expect.poll(() => page.getByText('This gateway serves no interactive sandboxes').isVisible(), SOON).toBe(true);
      expect(await page.locator('.banner-bad').count()).toBe(0);
      return;
    }
    expect(created.status, JSON.stringify(sandbox)).toBe(201);
    const exec = async (argv: string[]) => {
      const answer = await stack.api(stack.admin, `/v1/sandboxes/${sandbox.id}/exec`, { method: 'POST', body: JSON.stringify({ argv }) });
      expect(answer.status).toBe(200);
    };
    await exec(['echo', 'hello from the sandbox']);
    await exec(['sh', '-c', 'exit 4']);
    const put = await fetch(`${stack.url}/v1/sandboxes/${sandbox.id}/files?path=/work/note.txt`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${stack.admin.key}`, 'content-type': 'application/octet-stream' },
      body: 'a note',
    });
    expect(put.status).toBe(200);

    await page.goto(dashboard('sandboxes'));
    const row = page.locator(`tr[data-sandbox-id="${sandbox.id}"]`);
    await expect.poll(() => row.isVisible(), SOON).toBe(true);
    await screenshot('sandboxes');
    await row.getByRole('link').click();
    await expect.poll(() => page.locator('[data-chain]').getAttribute('data-chain'), SOON).toBe('verified');
    expect(await attributes(page.locator('[data-exec-id] [data-exit-code]'), 'data-exit-code')).toEqual(['0', '4']);
    expect(await page.getByRole('table', { name: 'Files' }).textContent()).toContain('/work/note.txt');
    expect(await page.locator('[data-live]').getAttribute('data-live')).toBe('live');
    await screenshot('sandbox', true);

    // Destroyed elsewhere: the open page follows its chain to the seal.
    expect((await stack.api(stack.admin, `/v1/sandboxes/${sandbox.id}`, { method: 'DELETE' })).status).toBe(200);
    await expect.poll(() => page.locator('[data-live]').getAttribute('data-live'), { timeout: 30_000 }).toBe('ended');
    await expect.poll(() => page.locator('.page-header [data-state]').first().getAttribute('data-state'), SOON).toBe('DESTROYED');
    await expect.poll(() => page.locator('[data-chain]').getAttribute('data-chain'), SOON).toBe('verified');
    // Sealed, its seal is signed and logged: the proof panel checks it as a run's.
    await expect.poll(() => page.locator('[data-proof]').getAttribute('data-proof'), { timeout: 45_000, interval: 200 }).toBe('verified');
    expect(await attributes(page.locator('[data-proof-line]'), 'data-status')).toEqual(['verified', 'verified', 'verified', 'verified', 'verified']);
  });

  it('lists, creates (the secret shown once) and revokes API keys, and shows the operator the tenants', async () => {
    await page.goto(dashboard('keys'));
    const table = page.getByRole('table', { name: 'Keys' });
    await expect.poll(() => table.isVisible(), SOON).toBe(true);
    expect(await table.locator(`tr[data-key-id="${stack.admin.id}"]`).textContent()).toContain('active');
    // The operator sees the tenants; its own is there.
    await expect.poll(() => page.locator('tr[data-tenant-id="default"]').isVisible(), SOON).toBe(true);

    const form = page.getByRole('form', { name: 'Create a key' });
    await form.getByLabel('runs:write').check();
    await form.getByRole('button', { name: 'Create key' }).click();
    const secret = page.locator('[data-secret]');
    await expect.poll(() => secret.isVisible(), SOON).toBe(true);
    const key = (await secret.textContent()) ?? '';
    expect(key).toMatch(/^cairn_[a-z2-7]{8}_[A-Za-z0-9_-]{43}$/);
    expect((await stack.api({ id: '', key, tenant: 'default' }, '/v1/runs?limit=1')).status).toBe(200);
    // Shown once: the table never holds it, and neither does the page once dismissed or reloaded.
    expect(await table.textContent()).not.toContain(key.slice(15));
    await page.getByRole('button', { name: 'I have stored it' }).click();
    await page.reload();
    await expect.poll(() => table.isVisible(), SOON).toBe(true);
    expect(await page.content()).not.toContain(key.slice(15));
    await screenshot('keys', true);

    const prefix = key.slice('cairn_'.length, 'cairn_'.length + 8);
    const row = table.locator('tr', { hasText: `cairn_${prefix}_` });
    expect(await row.textContent()).toContain('runs:read, runs:write');
    page.once('dialog', (dialog) => void dialog.accept());
    await row.getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(() => row.textContent(), SOON).toContain('revoked');
    expect((await stack.api({ id: '', key, tenant: 'default' }, '/v1/runs?limit=1')).status).toBe(401);
    expect(requestUrls.filter((url) => url.includes(key.slice(15)))).toEqual([]);
  });

  it('signs a tab out when the gateway refuses its key (revoked elsewhere), and signs in again with the key typed in', async () => {
    const viewer = await stack.mintKey('default', ['runs:read']);
    const tab = await context.newPage();
    tab.on('request', (request) => requestUrls.push(request.url()));
    try {
      await tab.goto(dashboard());
      const field = tab.getByLabel('API key');
      await expect.poll(() => field.isVisible(), SOON).toBe(true);
      await field.fill(viewer.key);
      await tab.keyboard.press('Enter');
      await expect.poll(() => tab.getByRole('heading', { name: 'Runs' }).isVisible(), SOON).toBe(true);
      expect(await tab.evaluate('sessionStorage.getItem("cairn.apiKey")')).toBe(viewer.key);

      expect((await stack.api(stack.admin, `/v1/keys/${viewer.id}/revoke`, { method: 'POST', body: '{}' })).status).toBe(200);
      // The runs list refreshes every 5 s: its next read is refused, and the tab forgets the key.
      await expect.poll(() => field.isVisible(), { timeout: 20_000, interval: 200 }).toBe(true);
      expect(await tab.evaluate('sessionStorage.getItem("cairn.apiKey")')).toBeNull();

      await field.fill(stack.admin.key);
      await tab.keyboard.press('Enter');
      await expect.poll(() => tab.getByRole('heading', { name: 'Runs' }).isVisible(), SOON).toBe(true);
      expect(await tab.evaluate('sessionStorage.getItem("cairn.apiKey")')).toBe(stack.admin.key);
      expect(requestUrls.filter((url) => url.includes(viewer.key.slice(15)))).toEqual([]);
    } finally {
      await tab.close();
    }
  });

  it('never put the key in a URL, and the page broke no Content-Security-Policy rule', () => {
    expect(requestUrls.length).toBeGreaterThan(10);
    expect(requestUrls.filter((url) => url.includes(stack.admin.key))).toEqual([]);
    expect(cspViolations).toEqual([]);
  });
});
