import type { ServerResponse } from 'node:http';
import { CairnError } from '@cairn/contracts';
import { JsonLogger } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { OnModuleDestroy } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG } from '../gateway.tokens.js';
import { RunReadsRepository } from './run-reads.repository.js';

/** Receipts read per poll: a stream catching up sends them in pages and polls again at once. */
const PAGE = 256;
/** What a browser's EventSource waits before reconnecting (it then sends Last-Event-ID). */
const RETRY_MS = 2000;

const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/**
 * One client's stream of one run's receipts: polls the projection for rows after the last seq
 * sent, sends them in chain order (never past a gap, so nothing is skipped and nothing sent
 * twice), ends after `run.sealed`, and stops as soon as the client goes away.
 */
class RunEventStream {
  private stopped = false;
  private wake: (() => void) | null = null;
  private lastWrite = Date.now();
  readonly done: Promise<void>;

  constructor(
    private readonly raw: ServerResponse,
    private readonly runId: string,
    private last: number,
    private readonly reads: RunReadsRepository,
    private readonly config: GatewayConfig,
    private readonly logger: JsonLogger,
  ) {
    raw.on('close', () => this.stop());
    this.done = this.run().catch((error: unknown) => {
      // The client resumes from its Last-Event-ID; this stream ends rather than guessing.
      this.logger.write('warn', 'event stream ended on an error', { runId, error: error instanceof Error ? error.message : String(error) });
    }).finally(() => this.end());
  }

  stop(): void {
    this.stopped = true;
    this.wake?.();
  }

  private async run(): Promise<void> {
    const sealedAt = await this.reads.sealSeq(this.runId);
    if (sealedAt !== null && this.last >= sealedAt) return;
    while (!this.stopped) {
      const rows = await this.reads.receiptsAfter(this.runId, this.last, PAGE);
      for (const row of rows) {
        if (this.stopped || row.seq !== this.last + 1) break;
        const open = this.write(`id: ${this.runId}:${row.seq}\nevent: receipt\ndata: ${JSON.stringify(row.receipt)}\n\n`);
        this.last = row.seq;
        if (row.type === 'run.sealed') return;
        if (!open) await this.drained();
      }
      if (rows.length === PAGE) continue;
      if (Date.now() - this.lastWrite >= this.config.CAIRN_GATEWAY_SSE_HEARTBEAT_MS) this.write(': heartbeat\n\n');
      await this.sleep(this.config.CAIRN_GATEWAY_SSE_POLL_MS);
    }
  }

  /** False when the socket's buffer is full: wait for it to drain before reading more. */
  private write(text: string): boolean {
    if (this.stopped || this.raw.writableEnded || this.raw.destroyed) return true;
    this.lastWrite = Date.now();
    return this.raw.write(text);
  }

  private drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.raw.off('drain', done);
        this.wake = null;
        resolve();
      };
      this.raw.on('drain', done);
      this.wake = done;
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wake = null;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
    });
  }

  private end(): void {
    this.stopped = true;
    if (!this.raw.writableEnded && !this.raw.destroyed) this.raw.end();
  }
}

/** The gateway's open event streams: bounded in number, all ended when the gateway stops. */
@Injectable()
export class RunEventStreams implements OnModuleDestroy {
  private readonly open = new Set<RunEventStream>();

  constructor(
    private readonly reads: RunReadsRepository,
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
    private readonly logger: JsonLogger,
  ) {}

  get openCount(): number {
    return this.open.size;
  }

  /** Takes the reply over (Nest sends nothing more) and streams the run's receipts after `after`. */
  start(reply: FastifyReply, runId: string, after: number): void {
    if (this.open.size >= this.config.CAIRN_GATEWAY_MAX_STREAMS) {
      throw new CairnError('E_RATE_LIMITED', `too many event streams are open (${this.open.size}); try again later`, { limit: this.config.CAIRN_GATEWAY_MAX_STREAMS });
    }
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, SSE_HEADERS);
    raw.write(`retry: ${RETRY_MS}\n\n`);
    const stream = new RunEventStream(raw, runId, after, this.reads, this.config, this.logger);
    this.open.add(stream);
    void stream.done.finally(() => this.open.delete(stream));
  }

  /** Before the HTTP server closes: end every stream (clients resume with Last-Event-ID). */
  async onModuleDestroy(): Promise<void> {
    const streams = [...this.open];
    for (const stream of streams) stream.stop();
    await Promise.allSettled(streams.map((stream) => stream.done));
  }
}
