import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createGatewayMetrics, exposedSeriesNames, UNMATCHED_ROUTE } from './gateway-metrics.js';
import { runStageDurations } from './metrics-sources.service.js';

const DEPLOY = fileURLToPath(new URL('../../../../deploy/', import.meta.url));
const read = (path: string) => readFileSync(`${DEPLOY}${path}`, 'utf8');

/** Every `cairn_…` name a PromQL expression uses. */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\bcairn_[a-z0-9_]+\b/g)].map((m) => m[0]);
}

const exposed = exposedSeriesNames(createGatewayMetrics({ defaultMetrics: false }).registry);

describe('deploy/prometheus', () => {
  it('prometheus.yml scrapes /metrics with a bearer key from a file and loads alerts.yml', () => {
    const config = parse(read('prometheus/prometheus.yml')) as {
      rule_files: string[];
      scrape_configs: { job_name: string; metrics_path: string; authorization: { type: string; credentials_file: string; credentials?: string } }[];
    };
    expect(config.rule_files).toEqual(['alerts.yml']);
    const [job] = config.scrape_configs;
    expect(job).toMatchObject({ metrics_path: '/metrics', authorization: { type: 'Bearer' } });
    expect(job!.authorization.credentials_file).toMatch(/^\//);
    expect(job!.authorization.credentials).toBeUndefined();
  });

  it('alerts.yml: every rule names only series /metrics exposes, and the alerts the runbook promises are there', () => {
    const rules = (parse(read('prometheus/alerts.yml')) as { groups: { rules: { alert: string; expr: string }[] }[] }).groups.flatMap((g) => g.rules);
    expect(rules.map((r) => r.alert)).toEqual(
      expect.arrayContaining(['CairnRunsFailingInternal', 'CairnConsumerLagGrowing', 'CairnNoHealthyWorker', 'CairnWebhookDeliveriesFailing', 'CairnStageLatencyHigh']),
    );
    for (const rule of rules) {
      const names = metricNames(rule.expr);
      expect(names.length, rule.alert).toBeGreaterThan(0);
      for (const name of names) expect(exposed.has(name), `${rule.alert}: ${name}`).toBe(true);
    }
    expect(rules.find((r) => r.alert === 'CairnRunsFailingInternal')!.expr).toContain('E_UNKNOWN_STATE');
  });
});

describe('deploy/grafana/cairn.json', () => {
  it('parses, and every panel queries only series /metrics exposes', () => {
    const dashboard = JSON.parse(read('grafana/cairn.json')) as { uid: string; panels: { title: string; targets: { expr: string }[] }[] };
    expect(dashboard.uid).toBe('cairn-overview');
    const used = new Set<string>();
    for (const panel of dashboard.panels) {
      expect(panel.targets.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets) for (const name of metricNames(target.expr)) used.add(name);
    }
    for (const name of used) expect(exposed.has(name), name).toBe(true);
    // Each family an operator watches has a panel.
    for (const family of ['cairn_runs', 'cairn_run_stage_duration_seconds_bucket', 'cairn_receipts_appended_total', 'cairn_consumer_lag_messages', 'cairn_worker_warm_pool_size', 'cairn_worker_warm_pool_misses_total', 'cairn_worker_containers_started_total', 'cairn_webhook_delivery_failures_total', 'cairn_api_requests_total']) {
      expect(used.has(family), family).toBe(true);
    }
  });
});

describe('the gateway registry', () => {
  it('names every family cairn_… and labels none by run, key or path', () => {
    const registry = createGatewayMetrics().registry;
    for (const metric of registry.getMetricsAsArray()) {
      const { name, labelNames } = metric as unknown as { name: string; labelNames: string[] };
      expect(name).toMatch(/^cairn_/);
      for (const label of labelNames ?? []) expect(['run', 'run_id', 'key', 'key_id', 'tenant', 'path', 'url']).not.toContain(label);
    }
  });

  it('counts a request under its route template, and keeps two registries apart', async () => {
    const a = createGatewayMetrics({ defaultMetrics: false });
    const b = createGatewayMetrics({ defaultMetrics: false });
    a.apiRequests.inc({ method: 'GET', route: UNMATCHED_ROUTE, status: '404' });
    expect(await a.registry.metrics()).toContain('cairn_api_requests_total{method="GET",route="unmatched",status="404"} 1');
    expect(await b.registry.metrics()).not.toContain('route="unmatched"');
  });
});

describe('runStageDurations', () => {
  const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
  it('splits a sealed run into its three stages, in seconds', () => {
    expect(runStageDurations({ submitted_at: at(0), scheduled_at: at(2), started_at: at(5), sealed_at: at(15) })).toEqual({
      submitted_to_scheduled: 2,
      scheduled_to_running: 3,
      running_to_sealed: 10,
    });
  });
  it('leaves out a stage the run never reached (a denied run was never scheduled), and never goes negative on clock skew', () => {
    expect(runStageDurations({ submitted_at: at(0), scheduled_at: null, started_at: null, sealed_at: at(1) })).toEqual({});
    expect(runStageDurations({ submitted_at: at(3), scheduled_at: at(2), started_at: null, sealed_at: at(9) })).toEqual({ submitted_to_scheduled: 0 });
  });
});
