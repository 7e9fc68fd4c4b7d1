import { CommandBus, WorkerRegistry } from '@cairn/operational';
import { workerStatus } from '@cairn/scheduling';
import { JsonLogger } from '@cairn/service-kit';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { Inject, Injectable } from '@nestjs/common';
import type { OnApplicationBootstrap } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG, GATEWAY_NATS } from '../gateway.tokens.js';
import { GatewayWebhooks } from '../webhooks/gateway-webhooks.js';
import { errorCodeLabel } from './gateway-metrics.js';
import type { GatewayMetrics, MetricSource, RunStage } from './gateway-metrics.js';

/** Injection token of the gateway's `GatewayMetrics` (made by `startGateway`: its request hook counts into it too). */
export const GATEWAY_METRICS = Symbol('GATEWAY_METRICS');

/** The most evidence rows one refresh looks through for newly sealed runs; a backlog is caught up over the next scrapes. */
export const STAGE_SCAN_WINDOW = 10_000;

interface SealedRow {
  stream_seq: string;
  state: string | null;
  error_code: string | null;
  sealed_at: Date;
  submitted_at: Date | null;
  scheduled_at: Date | null;
  started_at: Date | null;
}

function seconds(from: Date | null, to: Date | null): number | null {
  if (from === null || to === null) return null;
  // Receipt times come from several hosts' clocks: a small skew must not make a negative duration.
  return Math.max(0, (to.getTime() - from.getTime()) / 1000);
}

/** What a sealed run spent in each stage, from its receipts' times; a stage it never reached is absent. */
export function runStageDurations(row: Pick<SealedRow, 'sealed_at' | 'submitted_at' | 'scheduled_at' | 'started_at'>): Partial<Record<RunStage, number>> {
  const durations: Partial<Record<RunStage, number>> = {};
  const queued = seconds(row.submitted_at, row.scheduled_at);
  const starting = seconds(row.scheduled_at, row.started_at);
  const running = seconds(row.started_at, row.sealed_at);
  if (queued !== null) durations.submitted_to_scheduled = queued;
  if (starting !== null) durations.scheduled_to_running = starting;
  if (running !== null) durations.running_to_sealed = running;
  return durations;
}

/**
 * Fills the metrics from what the gateway can read: the projections (PostgreSQL), the evidence and
 * command streams' state (NATS), the worker registry (KV) and the webhook store. One refresh at a
 * time, reused for `CAIRN_GATEWAY_METRICS_CACHE_MS`; each source bounded by
 * `CAIRN_GATEWAY_METRICS_TIMEOUT_MS` (server-side too, `statement_timeout`), and one that fails or
 * is late keeps its last values with `cairn_metrics_source_up` 0.
 */
@Injectable()
export class MetricsSources implements OnApplicationBootstrap {
  private refreshing: Promise<void> | null = null;
  private refreshedAt = Number.NEGATIVE_INFINITY;
  /** The stream seq up to which sealed runs have been observed; null until the first refresh reads where the log is. */
  private stageWatermark: number | null = null;

  constructor(
    @Inject(GATEWAY_METRICS) private readonly metrics: GatewayMetrics,
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
    @Inject(GATEWAY_NATS) private readonly nc: NatsConnection,
    private readonly dataSource: DataSource,
    private readonly bus: CommandBus,
    private readonly registry: WorkerRegistry,
    private readonly webhooks: GatewayWebhooks,
    private readonly logger: JsonLogger,
  ) {}

  /** The stage histograms count runs sealed from the gateway's start on, not from its first scrape. */
  onApplicationBootstrap(): void {
    void this.refresh();
  }

  /** Brings the metrics up to date unless they are fresh enough; concurrent scrapes share one refresh. */
  refresh(): Promise<void> {
    if (this.refreshing !== null) return this.refreshing;
    if (Date.now() - this.refreshedAt < this.config.CAIRN_GATEWAY_METRICS_CACHE_MS) return Promise.resolve();
    this.refreshing = this.readAll().finally(() => {
      this.refreshedAt = Date.now();
      this.refreshing = null;
    });
    return this.refreshing;
  }

  private async readAll(): Promise<void> {
    await Promise.all([
      this.source('runs', () => this.readRuns()),
      this.source('run_stages', () => this.readRunStages()),
      this.source('evidence_stream', () => this.readEvidenceStream()),
      this.source('consumers', () => this.readConsumers()),
      this.source('workers', () => this.readWorkers()),
      this.source('webhooks', () => this.readWebhooks()),
    ]);
  }

  private async source(name: MetricSource, read: () => Promise<void>): Promise<void> {
    const timeoutMs = this.config.CAIRN_GATEWAY_METRICS_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([read(), late]);
      this.metrics.sourceUp.set({ source: name }, 1);
    } catch (error) {
      this.metrics.sourceUp.set({ source: name }, 0);
      this.logger.write('warn', 'a metrics source did not answer', { source: name, error: error instanceof Error ? error.message : String(error) });
    } finally {
      clearTimeout(timer);
    }
  }

  /** A read-only transaction whose statements PostgreSQL itself cancels past the timeout. */
  private bounded<T>(work: (query: <R>(sql: string, params?: unknown[]) => Promise<R[]>) => Promise<T>): Promise<T> {
    return this.dataSource.transaction(async (manager) => {
      await manager.query(`SET TRANSACTION READ ONLY`);
      await manager.query(`SET LOCAL statement_timeout = ${this.config.CAIRN_GATEWAY_METRICS_TIMEOUT_MS}`);
      return work(<R>(sql: string, params: unknown[] = []) => manager.query<R[]>(sql, params));
    });
  }

  private async readRuns(): Promise<void> {
    const rows = await this.bounded((query) => query<{ state: string; error_code: string | null; n: number }>(`SELECT state, error_code, count(*)::int AS n FROM runs GROUP BY state, error_code`));
    this.metrics.runs.reset();
    for (const row of rows) this.metrics.runs.set({ state: row.state, error_code: errorCodeLabel(row.error_code) }, row.n);
  }

  /**
   * Runs sealed since the last refresh, found by stream seq (the primary key) in a bounded window,
   * with their stage times: submitted (`runs.created_at`), scheduled (the first `run.scheduled`
   * receipt of the chain, through the `(chain_id, seq)` index), running (`runs.started_at`).
   */
  private async readRunStages(): Promise<void> {
    await this.bounded(async (query) => {
      const [head] = await query<{ max: string | null }>(`SELECT max(stream_seq)::text AS max FROM evidence_events`);
      const projected = head?.max === null || head?.max === undefined ? 0 : Number(head.max);
      if (this.stageWatermark === null) {
        this.stageWatermark = projected;
        return;
      }
      const from = this.stageWatermark;
      const to = Math.min(projected, from + STAGE_SCAN_WINDOW);
      if (to <= from) return;
      const rows = await query<SealedRow>(
        `SELECT s.stream_seq::text AS stream_seq, r.state, r.error_code, s.ts AS sealed_at, r.created_at AS submitted_at, r.started_at,
                (SELECT min(e.ts) FROM evidence_events e WHERE e.chain_id = s.chain_id AND e.type = 'run.scheduled') AS scheduled_at
           FROM evidence_events s LEFT JOIN runs r ON r.run_id = s.chain_id
          WHERE s.stream_seq > $1 AND s.stream_seq <= $2 AND s.type = 'run.sealed' AND s.chain_id LIKE 'run\\_%'`,
        [from, to],
      );
      for (const row of rows) {
        this.metrics.runsEnded.inc({ state: row.state ?? 'UNKNOWN', error_code: errorCodeLabel(row.error_code) });
        for (const [stage, value] of Object.entries(runStageDurations(row))) this.metrics.runStage.observe({ stage }, value);
      }
      this.stageWatermark = to;
    });
  }

  private async readEvidenceStream(): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    const info = await jsm.streams.info(this.config.CAIRN_EVIDENCE_STREAM);
    this.metrics.receiptsAppended.reset();
    this.metrics.receiptsAppended.inc(info.state.last_seq);
    this.metrics.evidenceMessages.set(info.state.messages);
    this.metrics.evidenceBytes.set(info.state.bytes);
  }

  private async readConsumers(): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    const lags: { stream: string; consumer: string; lag: number; ackPending: number }[] = [];
    for (const [label, stream] of [
      ['evidence', this.config.CAIRN_EVIDENCE_STREAM],
      ['commands', this.bus.streamName],
    ] as const) {
      for await (const info of jsm.consumers.list(stream)) {
        // Durable consumers only: an ephemeral one (a CLI's `run --wait`, an SSE fallback) is nobody's backlog.
        if (info.config.durable_name === undefined) continue;
        lags.push({ stream: label, consumer: info.name, lag: info.num_pending + info.num_ack_pending, ackPending: info.num_ack_pending });
      }
    }
    this.metrics.consumerLag.reset();
    this.metrics.consumerAckPending.reset();
    for (const { stream, consumer, lag, ackPending } of lags) {
      this.metrics.consumerLag.set({ stream, consumer }, lag);
      this.metrics.consumerAckPending.set({ stream, consumer }, ackPending);
    }
  }

  private async readWorkers(): Promise<void> {
    const workers = await this.registry.list();
    const now = Date.now();
    const m = this.metrics;
    for (const gauge of [m.workers, m.workerHealthy, m.workerSlots, m.workerInFlight, m.warmPoolSize]) gauge.reset();
    for (const counter of [m.warmPoolHits, m.warmPoolMisses, m.containersStarted]) counter.reset();
    let healthy = 0;
    for (const worker of workers) {
      const status = workerStatus(worker, now, this.config.CAIRN_WORKER_STALE_AFTER_MS);
      const up = status !== 'unhealthy' && status !== 'stale';
      if (up) healthy += 1;
      const labels = { worker: worker.workerId };
      m.workerHealthy.set(labels, up ? 1 : 0);
      m.workerSlots.set(labels, worker.capacity.slots);
      m.workerInFlight.set(labels, worker.inFlight.length);
      if (worker.pool !== undefined) {
        m.warmPoolSize.set(labels, worker.pool.size);
        m.warmPoolHits.inc(labels, worker.pool.hits);
        m.warmPoolMisses.inc(labels, worker.pool.misses);
        m.containersStarted.inc(labels, worker.pool.containersStarted);
      }
    }
    m.workers.set({ status: 'healthy' }, healthy);
    m.workers.set({ status: 'unhealthy' }, workers.length - healthy);
  }

  private async readWebhooks(): Promise<void> {
    const counts = await this.webhooks.store.deliveryCounts(this.config.CAIRN_GATEWAY_METRICS_TIMEOUT_MS);
    for (const [status, n] of Object.entries(counts.byStatus)) this.metrics.webhookDeliveries.set({ status }, n);
    this.metrics.webhookFailedAttempts.reset();
    this.metrics.webhookFailedAttempts.inc(counts.failedAttempts);
  }
}
