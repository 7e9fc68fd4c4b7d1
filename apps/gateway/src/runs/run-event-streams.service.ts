import type { ServerResponse } from 'node:http';
import { CairnError } from '@cairn/contracts';
import { jsonLine } from '@cairn/evidence';
import { chainSubjects } from '@cairn/evidence-log';
import { ProjectionNotices } from '@cairn/persistence';
import { JsonLogger } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { OnModuleDestroy } from '@nestjs/common';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { FastifyReply } from 'fastify';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG, GATEWAY_NATS } from '../gateway.tokens.js';
import { RunReadsRepository } from './run-reads.repository.js';

/** Receipts read per poll: a stream catching up sends them in pages and polls again at once. */
const PAGE = 256;
/** What a browser's EventSource waits before reconnecting (it then sends Last-Event-ID). */
const RETRY_MS = 2000;
/**
 * After the stream shows a receipt the projection does not have yet, how soon to look again: the
 * projector writes as soon as it is free, so it is usually there within a few milliseconds.
 */
const CATCH_UP_MS = [2, 5, 10, 20, 40, 80];

const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/**
 * One client's stream of one run's receipts: reads the projection for rows after the last seq
 * sent, sends them in chain order (never past a gap, so nothing is skipped and nothing sent
 * twice), ends after `run.sealed`, and stops as soon as the client goes away. It reads when the
 * evidence stream shows the run a new receipt (`seen`), and every poll interval in any case: the
 * wake-up is for speed only, the projection stays the one source of what is sent.
 */
class RunEventStream {
  private stopped = false;
  private wake: (() => void) | null = null;
  private sleeping = false;
  private lastWrite = Date.now();
  /** The highest chain seq the evidence stream has shown for this run (0: none seen). */
  private seen = 0;
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

  /** The evidence stream carried receipt `seq` of this run: read the projection again now. */
  saw(seq: number): void {
    if (seq <= this.seen) return;
    this.seen = seq;
    // Only a stream waiting for news is woken; one waiting for its client to drain keeps waiting.
    if (this.sleeping) this.wake?.();
  }

  private async run(): Promise<void> {
    const sealedAt = await this.reads.sealSeq(this.runId);
    if (sealedAt !== null && this.last >= sealedAt) return;
    let catchUp = 0;
    while (!this.stopped) {
      const rows = await this.reads.receiptsAfter(this.runId, this.last, PAGE);
      for (const row of rows) {
        if (this.stopped || row.seq !== this.last + 1) break;
        // One data line (`jsonLine`: no raw line break of any kind, U+2028/U+2029 escaped too).
        const open = this.write(`id: ${this.runId}:${row.seq}\nevent: receipt\ndata: ${jsonLine(row.receipt)}\n`);
        this.last = row.seq;
        if (row.type === 'run.sealed') return;
        if (!open) await this.drained();
      }
      if (rows.length === PAGE) continue;
      if (Date.now() - this.lastWrite >= this.config.CAIRN_GATEWAY_SSE_HEARTBEAT_MS) this.write(': heartbeat\n\n');
      // Behind what the stream showed: the projector is about to write it; look again shortly.
      const behind = this.seen > this.last && catchUp < CATCH_UP_MS.length;
      await this.sleep(behind ? CATCH_UP_MS[catchUp++]! : this.config.CAIRN_GATEWAY_SSE_POLL_MS);
      if (!behind || this.seen <= this.last) catchUp = 0;
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
    this.sleeping = true;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.wake = null;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
    }).finally(() => {
      this.sleeping = false;
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
    @Inject(GATEWAY_NATS) private readonly nc: NatsConnection,
    private readonly notices: ProjectionNotices,
  ) {}

  get openCount(): number {
    return this.open.size;
  }

  /**
   * Takes the reply over (Nest sends nothing more) and streams the chain's receipts after `after`:
   * a run's, or a sandbox session's (`sbx_…`, which also ends with `run.sealed`).
   */
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
    // Woken when the projector has committed the chain's next receipts: one read each time. While
    // the notices' connection is down, woken by the evidence stream instead (then read until the
    // projector has caught up); the poll interval is the backstop of both.
    const unsubscribe = this.notices.subscribe(runId, (seq) => stream.saw(seq));
    const wakeUps = this.notices.live ? null : this.watch(runId, stream);
    void stream.done.finally(() => {
      unsubscribe();
      wakeUps?.unsubscribe();
      this.open.delete(stream);
    });
  }

  /**
   * A plain NATS subscription to the run's evidence subjects (`<prefix>.<run id>.>`): every receipt appended to the run is
   * also delivered here, and wakes the stream. Without it (NATS closed) the stream still polls.
   */
  private watch(runId: string, stream: RunEventStream): Subscription | null {
    try {
      return this.nc.subscribe(chainSubjects(this.config.CAIRN_EVIDENCE_SUBJECT_PREFIX, runId), {
        callback: (error, msg) => {
          if (error !== null) return;
          const seq = seqOf(msg.data);
          if (seq !== null) stream.saw(seq);
        },
      });
    } catch (error) {
      this.logger.write('warn', 'event stream polls only: cannot watch the evidence stream', { runId, error: error instanceof Error ? error.message : String(error) });
      return null;
    }
  }

  /** Before the HTTP server closes: end every stream (clients resume with Last-Event-ID). */
  async onModuleDestroy(): Promise<void> {
    const streams = [...this.open];
    for (const stream of streams) stream.stop();
    await Promise.allSettled(streams.map((stream) => stream.done));
  }
}

/** A receipt's chain seq, read without trusting it further than a wake-up; null when absent. */
function seqOf(data: Uint8Array): number | null {
  try {
    const seq = (JSON.parse(new TextDecoder().decode(data)) as { seq?: unknown }).seq;
    return typeof seq === 'number' && Number.isSafeInteger(seq) && seq > 0 ? seq : null;
  } catch {
    return null;
  }
}
