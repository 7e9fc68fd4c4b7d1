import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The stages a run's latency is split into, each from the receipt that opens it to the one that closes it. */
export const RUN_STAGES = ['submitted_to_scheduled', 'scheduled_to_running', 'running_to_sealed'] as const;
export type RunStage = (typeof RUN_STAGES)[number];

/** What `/metrics` reads outside the gateway's own process; each has a `cairn_metrics_source_up` series. */
export const METRIC_SOURCES = ['runs', 'run_stages', 'evidence_stream', 'consumers', 'workers', 'webhooks'] as const;
export type MetricSource = (typeof METRIC_SOURCES)[number];

/** A route label for a request no declared route matched: one value, whatever the URL was. */
export const UNMATCHED_ROUTE = 'unmatched';

const STAGE_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * Every metric family the gateway exposes, in one registry of its own (never prom-client's global
 * one, so two gateways in one process — tests — do not share counters). Labels are bounded: states,
 * error codes, stages, route templates, consumer names, worker ids — never a run id, key or raw path.
 * Building it does no IO; the sources fill it (`MetricsSources`) and the request hook counts.
 */
export function createGatewayMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  const registers = [registry];
  const metrics = {
    registry,
    runs: new Gauge({ name: 'cairn_runs', help: 'Runs in the projection by state and error code (none: no error).', labelNames: ['state', 'error_code'], registers }),
    runsEnded: new Counter({
      name: 'cairn_runs_ended_total',
      help: 'Runs sealed since this gateway started, by final state and error code (none: no error).',
      labelNames: ['state', 'error_code'],
      registers,
    }),
    runStage: new Histogram({
      name: 'cairn_run_stage_duration_seconds',
      help: 'Seconds a run spent in each stage, observed when it is sealed: submitted_to_scheduled, scheduled_to_running, running_to_sealed (receipt times).',
      labelNames: ['stage'],
      buckets: STAGE_BUCKETS,
      registers,
    }),
    receiptsAppended: new Counter({ name: 'cairn_receipts_appended_total', help: "Receipts appended to the evidence stream (its last sequence): rate() is receipts per second.", registers }),
    evidenceMessages: new Gauge({ name: 'cairn_evidence_stream_messages', help: 'Messages the evidence stream holds.', registers }),
    evidenceBytes: new Gauge({ name: 'cairn_evidence_stream_bytes', help: 'Bytes the evidence stream holds.', registers }),
    consumerLag: new Gauge({
      name: 'cairn_consumer_lag_messages',
      help: "A durable consumer's messages not yet handled: pending delivery plus delivered and not acknowledged (stream: evidence or commands).",
      labelNames: ['stream', 'consumer'],
      registers,
    }),
    consumerAckPending: new Gauge({
      name: 'cairn_consumer_ack_pending_messages',
      help: "A durable consumer's messages delivered and not yet acknowledged.",
      labelNames: ['stream', 'consumer'],
      registers,
    }),
    workers: new Gauge({ name: 'cairn_workers', help: 'Registered runtime workers by status (healthy: may take work; unhealthy: registered, not taking work).', labelNames: ['status'], registers }),
    workerHealthy: new Gauge({ name: 'cairn_worker_healthy', help: '1 when the worker is healthy and heartbeating, else 0.', labelNames: ['worker'], registers }),
    workerSlots: new Gauge({ name: 'cairn_worker_slots', help: "The worker's slots (runs and sessions at once).", labelNames: ['worker'], registers }),
    workerInFlight: new Gauge({ name: 'cairn_worker_in_flight', help: 'Runs and sessions the worker reports in flight.', labelNames: ['worker'], registers }),
    warmPoolSize: new Gauge({ name: 'cairn_worker_warm_pool_size', help: 'Idle warm sandboxes on the worker.', labelNames: ['worker'], registers }),
    warmPoolHits: new Counter({ name: 'cairn_worker_warm_pool_hits_total', help: 'Sandboxes served from the warm pool, since the worker started.', labelNames: ['worker'], registers }),
    warmPoolMisses: new Counter({
      name: 'cairn_worker_warm_pool_misses_total',
      help: 'Sandboxes the warm pool (enabled) could not serve, started cold, since the worker started.',
      labelNames: ['worker'],
      registers,
    }),
    containersStarted: new Counter({
      name: 'cairn_worker_containers_started_total',
      help: "Containers the worker started (runs', sessions' and warm ones), since it started.",
      labelNames: ['worker'],
      registers,
    }),
    webhookDeliveries: new Gauge({ name: 'cairn_webhook_deliveries', help: 'Webhook deliveries by status (pending, delivered, dead).', labelNames: ['status'], registers }),
    webhookFailedAttempts: new Counter({ name: 'cairn_webhook_delivery_failures_total', help: 'Webhook delivery attempts that failed: no answer, or not 2xx.', registers }),
    apiRequests: new Counter({
      name: 'cairn_api_requests_total',
      help: 'REST requests answered, by method, declared route template (unmatched: no route) and status.',
      labelNames: ['method', 'route', 'status'],
      registers,
    }),
    apiDuration: new Histogram({
      name: 'cairn_api_request_duration_seconds',
      help: 'Seconds from a REST request to its answer, by method and declared route template.',
      labelNames: ['method', 'route'],
      buckets: REQUEST_BUCKETS,
      registers,
    }),
    sourceUp: new Gauge({
      name: 'cairn_metrics_source_up',
      help: 'Whether the last read of a source answered in time (1) or its series keep older values (0).',
      labelNames: ['source'],
      registers,
    }),
  };
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry, prefix: 'cairn_gateway_' });
  return metrics;
}
export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;

/** The error code as a label value: `none` for a run without one. */
export function errorCodeLabel(code: string | null): string {
  return code === null || code === '' ? 'none' : code;
}

/**
 * The families a registry exposes, as they appear in the text format: a histogram's `_bucket`,
 * `_sum` and `_count`, a counter's name as declared. For the check that alerts and dashboards name
 * only what exists.
 */
export function exposedSeriesNames(registry: Registry): Set<string> {
  const names = new Set<string>();
  for (const metric of registry.getMetricsAsArray()) {
    const { name, type } = metric as unknown as { name: string; type: string };
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
    else if (type === 'summary') for (const suffix of ['', '_sum', '_count']) names.add(`${name}${suffix}`);
    else names.add(name);
  }
  return names;
}
