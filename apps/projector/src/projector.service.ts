import { inSpan, parentFromHeaders, tracingActive } from '@cairn/tracing';
import { CONSUMER_PULL_EXPIRES_MS } from '@cairn/config';
import { setTimeout as delay } from 'node:timers/promises';
import { CairnError, isCairnError } from '@cairn/contracts';
import { ProjectionWriter } from '@cairn/persistence';
import type { BatchResult, ProjectionSource, RawEvidenceMessage } from '@cairn/persistence';
import type { Consumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { BeforeApplicationShutdown, OnApplicationBootstrap } from '@nestjs/common';
import { DeliveryQueue } from './delivery.queue.js';
import { rawMessageOf } from './raw-message.js';
import { EVIDENCE_CONSUMER, EVIDENCE_SOURCE } from './projector.tokens.js';
import { PROJECTOR_CONFIG } from './projector.config.js';
import type { ProjectorConfig } from './projector.config.js';

export interface ProjectorStats {
  batches: number;
  projected: number;
  poison: number;
  skipped: number;
  deferred: number;
  failedBatches: number;
  /** Messages read again from the stream to fill a hole behind the position (`healGap`). */
  healed: number;
  position: number;
}

/** How long a message that arrived ahead of a missing one waits before it is redelivered. */
const DEFER_BASE_MS = 200;
const DEFER_CAP_MS = 5_000;
const RETRY_CAP_MS = 30_000;

/**
 * Pulls the evidence stream through the durable consumer and hands each batch to the
 * projection writer; acknowledges only what the writer committed. Batches form naturally:
 * whatever arrived while the previous batch was being written, up to the batch size.
 */
@Injectable()
export class ProjectorService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Projector');
  private readonly counters: ProjectorStats = { batches: 0, projected: 0, poison: 0, skipped: 0, deferred: 0, failedBatches: 0, healed: 0, position: 0 };
  /** The position a batch last could not continue, and since when: a hole nobody may redeliver. */
  private gap: { position: number; since: number } | null = null;
  private messages: ConsumerMessages | null = null;
  private loop: Promise<void> = Promise.resolve();
  private consecutiveFailures = 0;
  private readonly stopping = new AbortController();

  constructor(
    @Inject(PROJECTOR_CONFIG) private readonly config: ProjectorConfig,
    private readonly writer: ProjectionWriter,
    @Inject(EVIDENCE_CONSUMER) private readonly consumer: Consumer,
    @Inject(EVIDENCE_SOURCE) private readonly source: ProjectionSource,
  ) {}

  /** Settles when consuming stops: resolves after a clean shutdown, rejects on a fatal error. */
  get done(): Promise<void> {
    return this.loop;
  }

  stats(): ProjectorStats {
    return { ...this.counters };
  }

  async onApplicationBootstrap(): Promise<void> {
    this.counters.position = await this.writer.position();
    // The tables say they hold the stream up to `position`: a stream that ends before it is not the
    // stream they were built from (deleted and made anew, say). Projecting it would skip every
    // message up to the old position without a word; stop instead (E_UNKNOWN_STATE is for runs).
    const info = await this.consumer.info();
    const streamEnd = info.delivered.stream_seq + info.num_pending;
    if (this.counters.position > streamEnd) {
      throw new CairnError(
        'E_CONFLICT',
        `the projections hold ${this.config.CAIRN_EVIDENCE_STREAM} up to stream seq ${this.counters.position}, but the stream ends at ${streamEnd}: it is not the stream they were built from; run \`cairn projections rebuild\` to project it from its first message`,
        { position: this.counters.position, streamEnd },
      );
    }
    // What the consumer counts as acknowledged beyond the position will never be delivered again
    // (commits a database crash or restore took back): read it from the stream before consuming.
    if (info.ack_floor.stream_seq > this.counters.position) await this.heal(info.ack_floor.stream_seq, []);
    this.messages = await this.consumer.consume({ max_messages: this.config.CAIRN_PROJECTOR_BATCH_SIZE * 2, expires: CONSUMER_PULL_EXPIRES_MS });
    this.loop = this.consume(this.messages);
    this.logger.log(
      `projecting ${this.config.CAIRN_EVIDENCE_STREAM} (${this.config.CAIRN_EVIDENCE_SUBJECT_PREFIX}.>) from position ${this.counters.position} with consumer ${this.config.CAIRN_PROJECTOR_DURABLE}`,
    );
  }

  /** Drain: stop pulling, finish the batch in hand, then let the connections close. */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping.abort();
    await this.messages?.close();
    await this.loop.catch(() => undefined);
    const c = this.counters;
    this.logger.log(
      `stopped at position ${c.position}: ${c.batches} batches, ${c.projected} projected, ${c.poison} poison, ${c.skipped} redeliveries skipped, ${c.deferred} deferred, ${c.healed} read again, ${c.failedBatches} failed`,
    );
  }

  /**
   * A reader moves delivered messages into a queue; the writer loop takes whatever is queued (up
   * to the batch size) each time it is free, after letting more join the first for up to
   * CAIRN_PROJECTOR_LINGER_MS: a few receipts a transaction when quiet, full batches under load.
   * A transaction per receipt cost each hop of a sandbox's create the projector's and
   * PostgreSQL's CPU while the next service was deciding (docs/adr/0010).
   */
  private async consume(messages: ConsumerMessages): Promise<void> {
    const queue = new DeliveryQueue<JsMsg>();
    const reader = (async () => {
      try {
        for await (const message of messages) queue.push(message);
      } finally {
        queue.close();
      }
    })();
    try {
      for (;;) {
        const batch = await queue.take(this.config.CAIRN_PROJECTOR_BATCH_SIZE, this.stopping.signal.aborted ? 0 : this.config.CAIRN_PROJECTOR_LINGER_MS);
        if (batch.length === 0) break;
        await this.flush(batch);
      }
    } finally {
      await messages.close();
      await reader;
    }
  }

  /**
   * `flushBatch` in a span of the batch, continuing the first receipt's trace, with a span per
   * receipt under its own append span: each run's trace shows when its receipts reached the
   * projections (ADR 0031). Nothing of it when tracing is off.
   */
  private async flush(batch: JsMsg[]): Promise<void> {
    if (!tracingActive() || batch.length === 0) return this.flushBatch(batch);
    const parents = batch.map((m) => parentFromHeaders(m.headers));
    const ends: (() => void)[] = [];
    const each = parents.map((parent, i) =>
      inSpan(`projector project ${batch[i]!.subject.split('.').at(-1) ?? ''}`, { kind: 'consumer', parent, attributes: { 'messaging.message.stream_seq': batch[i]!.seq } }, () => new Promise<void>((resolve) => ends.push(resolve))),
    );
    try {
      await inSpan('projector batch', { parent: parents[0]!, attributes: { 'cairn.batch.size': batch.length } }, () => this.flushBatch(batch));
    } finally {
      for (const end of ends) end();
      await Promise.all(each);
    }
  }

  private async flushBatch(batch: JsMsg[]): Promise<void> {
    let result: BatchResult;
    try {
      const messages = batch.map(rawMessageOf);
      result = await this.writer.applyBatch(messages);
      if (result.deferred.length === 0) this.gap = null;
      else if (await this.gapIsLost(result.position)) {
        this.count(result);
        await this.heal(Math.max(...result.deferred), batch);
        result = await this.writer.applyBatch(messages);
      }
    } catch (error) {
      this.counters.failedBatches += 1;
      // A projections database that follows another stream will not heal by retrying.
      if (isCairnError(error) && error.code === 'E_CONFLICT') {
        this.logger.fatal(describe(error));
        for (const m of batch) m.nak();
        await this.messages?.close();
        throw error;
      }
      this.consecutiveFailures += 1;
      const wait = Math.min(RETRY_CAP_MS, 250 * 2 ** Math.min(this.consecutiveFailures, 7));
      this.logger.error(`batch of ${batch.length} failed (${describe(error)}); redelivering in ${wait} ms`);
      for (const m of batch) m.nak(wait);
      // Back off, but never hold up a shutdown.
      await delay(wait, undefined, { signal: this.stopping.signal }).catch(() => undefined);
      return;
    }
    this.consecutiveFailures = 0;
    for (const m of batch) {
      if (m.seq <= result.position) m.ack();
      else m.nak(Math.min(DEFER_CAP_MS, DEFER_BASE_MS * m.info.deliveryCount));
    }
    this.count(result);
    if (result.poison > 0) this.logger.warn(`${result.poison} poison message(s) recorded in poison_events; position ${result.position}`);
  }

  /**
   * Whether the hole right after `position` will not be filled by a redelivery. What the consumer
   * counts as acknowledged is never delivered again: that, at once. What it still counts as pending
   * (held by a process that died) comes back after ack_wait: only a hole older than twice that.
   */
  private async gapIsLost(position: number): Promise<boolean> {
    const now = Date.now();
    if (this.gap?.position !== position) this.gap = { position, since: now };
    if (now - this.gap.since >= 2 * this.config.CAIRN_PROJECTOR_ACK_WAIT_MS) return true;
    const info = await this.consumer.info();
    return info.ack_floor.stream_seq > position;
  }

  /**
   * Fills the hole behind the position from the stream itself, up to `through`: the projections'
   * last durable position is where it starts, and the writer skips what a batch already holds.
   * Messages in hand are kept from redelivery meanwhile.
   */
  private async heal(through: number, inHand: readonly JsMsg[]): Promise<void> {
    const from = (await this.writer.position()) + 1;
    if (from > through) return;
    this.logger.warn(`stream seqs from ${from} are not projected and will not be delivered again (a commit the database lost?): reading them from the stream up to ${through}`);
    const size = this.config.CAIRN_PROJECTOR_BATCH_SIZE;
    let chunk: RawEvidenceMessage[] = [];
    const apply = async () => {
      const result = await this.writer.applyBatch(chunk);
      this.count(result);
      this.counters.healed += chunk.length;
      chunk = [];
      for (const m of inHand) m.working();
    };
    for await (const message of this.source.readAll({ fromStreamSeq: from, toStreamSeq: through })) {
      chunk.push(message);
      if (chunk.length >= size) await apply();
    }
    if (chunk.length > 0) await apply();
    this.gap = null;
    this.logger.log(`projected up to stream seq ${this.counters.position} again from the stream`);
  }

  private count(result: BatchResult): void {
    const counters = this.counters;
    counters.batches += 1;
    counters.projected += result.projected;
    counters.poison += result.poison;
    counters.skipped += result.skipped;
    counters.deferred += result.deferred.length;
    counters.position = result.position;
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
