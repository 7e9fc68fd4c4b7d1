import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';
import type { RunOutcome } from './stack.harness.js';

/*
 * `/metrics` on a real stack: a Prometheus key (metrics:read) scrapes it, the text parses and every
 * family docs/metrics.md names is there; one run that seals and one that policy denies move the
 * run-state gauge, the ended counter, the stage histograms, the receipts counter and the API
 * request counter; the worker's heartbeat brings its containers-started counter; no run id and no
 * raw path ever appears; without a key 401, with a key lacking the scope 403.
 */

const SMALL = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };

let stack: TestStack;
let metricsKey = '';
let readKey = '';
let otherTenantKey = '';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The Prometheus text format (0.0.4), strictly: every line a comment or `name{labels} value`; anything else fails. */
function parseExposition(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
      if (type) types.set(type[1]!, type[2]!);
      else expect(line).toMatch(/^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* /);
      continue;
    }
    // Values as Prometheus parses them (Go's ParseFloat): NaN and Inf in any case (prom-client writes `Nan`).
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (-?[0-9.e+-]+|[nN][aA][nN]|[+-][iI][nN][fF])$/.exec(line);
    if (match === null) throw new Error(`not a sample line: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    if (match[2] !== undefined && match[2] !== '') {
      for (const pair of match[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/g)) labels[pair[1]!] = pair[2]!;
    }
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return { samples, types };
}

async function scrape(key: string | null = metricsKey): Promise<{ status: number; contentType: string | null; text: string }> {
  const response = await fetch(`${stack.url}/metrics`, { headers: key === null ? {} : { authorization: `Bearer ${key}` } });
  return { status: response.status, contentType: response.headers.get('content-type'), text: await response.text() };
}

/** The sum of the samples of `name` whose labels include `labels`. */
function total(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((sum, s) => sum + s.value, 0);
}

async function runAndWait(name: string, spec: unknown): Promise<RunOutcome> {
  const path = await stack.specFile(name, spec);
  const cli = await stack.cairn(['run', path, '--wait', '--json']);
  try {
    return JSON.parse(cli.stdout) as RunOutcome;
  } catch {
    throw new Error(`cairn run printed no JSON (exit ${cli.code}):\n${cli.stdout}\n${cli.stderr}\n${await stack.logs()}`);
  }
}

/** Scrapes until `done` holds for the parsed samples (the cache and the heartbeat lag a little). */
async function scrapeUntil(done: (samples: Sample[]) => boolean, timeoutMs = 30_000): Promise<{ samples: Sample[]; text: string }> {
  const deadline = Date.now() + timeoutMs;
  let last = { samples: [] as Sample[], text: '' };
  while (Date.now() < deadline) {
    const { status, text } = await scrape();
    expect(status).toBe(200);
    last = { samples: parseExposition(text).samples, text };
    if (done(last.samples)) return last;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  return last;
}

const FAMILIES = {
  cairn_runs: 'gauge',
  cairn_runs_ended_total: 'counter',
  cairn_run_stage_duration_seconds: 'histogram',
  cairn_receipts_appended_total: 'counter',
  cairn_evidence_stream_messages: 'gauge',
  cairn_consumer_lag_messages: 'gauge',
  cairn_consumer_ack_pending_messages: 'gauge',
  cairn_workers: 'gauge',
  cairn_worker_healthy: 'gauge',
  cairn_worker_warm_pool_size: 'gauge',
  cairn_worker_warm_pool_hits_total: 'counter',
  cairn_worker_warm_pool_misses_total: 'counter',
  cairn_worker_containers_started_total: 'counter',
  cairn_webhook_deliveries: 'gauge',
  cairn_webhook_delivery_failures_total: 'counter',
  cairn_api_requests_total: 'counter',
  cairn_api_request_duration_seconds: 'histogram',
  cairn_metrics_source_up: 'gauge',
} as const;

beforeAll(async () => {
  stack = await TestStack.create('metrics', { CAIRN_GATEWAY_METRICS_CACHE_MS: '250' });
  await stack.up();
  metricsKey = await stack.mintKey('default', ['metrics:read']);
  readKey = await stack.mintKey('default', ['runs:read']);
  otherTenantKey = await stack.mintKey('metrics-other', ['metrics:read']);
}, 180_000);

afterAll(async () => {
  await stack?.dispose();
});

describe('GET /metrics', () => {
  it('answers 401 without a key or with a bad one, 403 for a key without metrics:read or of another tenant, and the text format to a metrics or admin key', async () => {
    const none = await scrape(null);
    expect(none.status).toBe(401);
    expect(JSON.parse(none.text)).toMatchObject({ code: 'E_UNAUTHORIZED' });
    const bad = await scrape('cairn_abcdefgh_notarealsecretnotarealsecretnotarealsecret0');
    expect(bad.status).toBe(401);
    const forbidden = await scrape(readKey);
    expect(forbidden.status).toBe(403);
    expect(JSON.parse(forbidden.text)).toMatchObject({ code: 'E_FORBIDDEN' });
    // The series are the deployment's: another tenant's key is refused even with the scope.
    const otherTenant = await scrape(otherTenantKey);
    expect(otherTenant.status).toBe(403);
    expect(JSON.parse(otherTenant.text)).toMatchObject({ code: 'E_FORBIDDEN' });
    const ok = await scrape();
    expect(ok.status).toBe(200);
    expect(ok.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect((await scrape(stack.apiKey)).status).toBe(200);
  });

  it('exposes every family, parsed, with every source answering', async () => {
    const { text } = await scrape();
    const { samples, types } = parseExposition(text);
    for (const [name, type] of Object.entries(FAMILIES)) expect(types.get(name), name).toBe(type);
    for (const source of ['runs', 'run_stages', 'evidence_stream', 'consumers', 'workers', 'webhooks']) expect(total(samples, 'cairn_metrics_source_up', { source }), source).toBe(1);
    // The stack's own durable consumers, by name, on the evidence stream.
    const consumers = samples.filter((s) => s.name === 'cairn_consumer_lag_messages' && s.labels.stream === 'evidence').map((s) => s.labels.consumer);
    expect(consumers).toEqual(expect.arrayContaining(['cairn-policy', 'cairn-scheduler', 'cairn-projector']));
    expect(total(samples, 'cairn_workers', { status: 'healthy' })).toBeGreaterThanOrEqual(1);
  });

  it('moves as one run seals and one is denied; no run id or raw path in it', async () => {
    const before = parseExposition((await scrape()).text).samples;
    await fetch(`${stack.url}/v1/no-such-route/zz-raw-path-marker`);

    const sealed = await runAndWait('metrics-ok', { name: 'metrics ok', image: 'cairn/sandbox-busybox:1', caps: SMALL, network: 'none', steps: [{ argv: ['echo', 'hi'] }] });
    expect(sealed).toMatchObject({ state: 'SEALED' });
    const denied = await runAndWait('metrics-denied', {
      name: 'metrics denied',
      image: 'cairn/sandbox-busybox:1',
      caps: SMALL,
      network: { egress: ['evil.test:8080'] },
      steps: [{ argv: ['echo', 'never'] }],
    });
    expect(denied).toMatchObject({ state: 'REJECTED', errorCode: 'E_POLICY_DENIED' });
    const receiptCount = (await stack.types(sealed.runId)).length + (await stack.types(denied.runId)).length;
    expect(receiptCount).toBeGreaterThan(8);
    const worker = stack.names.workerId;

    const moved = (s: Sample[]) =>
      total(s, 'cairn_runs_ended_total', { state: 'SEALED' }) >= total(before, 'cairn_runs_ended_total', { state: 'SEALED' }) + 1 &&
      total(s, 'cairn_runs_ended_total', { state: 'REJECTED' }) >= total(before, 'cairn_runs_ended_total', { state: 'REJECTED' }) + 1 &&
      total(s, 'cairn_worker_containers_started_total', { worker }) >= 1;
    const { samples: after, text } = await scrapeUntil(moved);

    const gauge = (s: Sample[], state: string, code: string) => total(s, 'cairn_runs', { state, error_code: code });
    expect(gauge(after, 'SEALED', 'none') - gauge(before, 'SEALED', 'none')).toBe(1);
    expect(gauge(after, 'REJECTED', 'E_POLICY_DENIED') - gauge(before, 'REJECTED', 'E_POLICY_DENIED')).toBe(1);
    const ended = (s: Sample[], state: string, code: string) => total(s, 'cairn_runs_ended_total', { state, error_code: code });
    expect(ended(after, 'SEALED', 'none') - ended(before, 'SEALED', 'none')).toBe(1);
    expect(ended(after, 'REJECTED', 'E_POLICY_DENIED') - ended(before, 'REJECTED', 'E_POLICY_DENIED')).toBe(1);

    // Both runs' receipts were appended (and perhaps others': the admin chain's key records).
    expect(total(after, 'cairn_receipts_appended_total') - total(before, 'cairn_receipts_appended_total')).toBeGreaterThanOrEqual(receiptCount);

    // The sealed run passed every stage; the denied one none that it never reached.
    const count = (s: Sample[], stage: string) => total(s, 'cairn_run_stage_duration_seconds_count', { stage });
    expect(count(after, 'submitted_to_scheduled') - count(before, 'submitted_to_scheduled')).toBe(1);
    expect(count(after, 'scheduled_to_running') - count(before, 'scheduled_to_running')).toBe(1);
    expect(count(after, 'running_to_sealed') - count(before, 'running_to_sealed')).toBe(1);

    // The CLI submitted both; this test read their receipts (stack.types): counted by route template, never by URL.
    const requests = (s: Sample[], labels: Record<string, string>) => total(s, 'cairn_api_requests_total', labels);
    expect(requests(after, { method: 'POST', route: '/v1/runs' }) - requests(before, { method: 'POST', route: '/v1/runs' })).toBeGreaterThanOrEqual(2);
    expect(requests(after, { method: 'GET', route: '/v1/runs/:id/events', status: '200' }) - requests(before, { method: 'GET', route: '/v1/runs/:id/events', status: '200' })).toBeGreaterThanOrEqual(2);
    expect(requests(after, { route: '/metrics', status: '401' })).toBeGreaterThanOrEqual(1);
    expect(requests(after, { route: '/metrics', status: '403' })).toBeGreaterThanOrEqual(1);
    expect(requests(after, { route: 'unmatched', status: '404' })).toBeGreaterThanOrEqual(1);
    expect(total(after, 'cairn_api_request_duration_seconds_count', { method: 'POST', route: '/v1/runs' })).toBeGreaterThanOrEqual(2);

    // The worker's heartbeat: its first run found the pool empty, then the pool was warmed.
    expect(total(after, 'cairn_worker_warm_pool_misses_total', { worker })).toBeGreaterThanOrEqual(1);
    expect(total(after, 'cairn_worker_healthy', { worker })).toBe(1);

    expect(text).not.toContain(sealed.runId);
    expect(text).not.toContain(denied.runId);
    expect(text).not.toContain('zz-raw-path-marker');
    expect(text).not.toContain(metricsKey);
    expect(text).not.toContain(stack.apiKey);
  }, 180_000);
});
