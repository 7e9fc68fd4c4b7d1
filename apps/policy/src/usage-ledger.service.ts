import { CONSUMER_PULL_EXPIRES_MS } from '@cairn/config';
import { CairnError, parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt } from '@cairn/contracts';
import { evidenceSubjects, parseEvidenceSubject } from '@cairn/evidence-log';
import type { EvidenceLog } from '@cairn/evidence-log';
import { USAGE_RECEIPT_TYPES, UsageLedger } from '@cairn/policy';
import type { RunUsageRecord } from '@cairn/policy';
import { EVIDENCE_LOG, JsonLogger, NATS_CONNECTION, SERVICE_CONFIG, SERVICE_LOGGER } from '@cairn/service-kit';
import { DeliverPolicy, jetstream } from '@nats-io/jetstream';
import type { ConsumerMessages } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { Inject, Injectable } from '@nestjs/common';
import type { OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { PolicyServiceConfig } from './policy.config.js';

/** How often entries that can never count again are dropped (at most). */
const PRUNE_EVERY_MS = 60_000;
/** The wait before a fold consumer that stopped is started again. */
const RESTART_MS = 500;

/** The types the ledger folds; every other message only moves its position, unparsed. */
const FOLDED: ReadonlySet<string> = new Set(USAGE_RECEIPT_TYPES);

/**
 * What budgets and quotas are counted from: policy's own ledger (`UsageLedger`, docs/adr/0027),
 * folded from the evidence log by an ordered consumer of its own — never a projection, and no
 * PostgreSQL. The consumer takes the whole stream (one filter subject) and skips, by the subject's
 * type and before parsing, every receipt usage does not depend on: nats.js makes a consumer of
 * several filter subjects through the one API subject (`$JS.API.CONSUMER.CREATE.<stream>`) that a
 * NATS user cannot be scoped to its own consumers on, so policy's user is not given it. Kept in memory and rebuilt
 * from the log at boot (from stream seq 1); an ordered consumer that stops (a reconnect, a leader
 * change) starts again after the last seq folded.
 *
 * The ordering guarantee: a run (or sandbox) is decided from the ledger only once the fold has
 * passed its own first receipt. The fold goes in stream order, so every earlier run of the tenant
 * is in it then, and two runs decided at once never both miss each other: the later one always
 * counts the earlier. Past CAIRN_POLICY_USAGE_WAIT_MS the decision fails E_UNAVAILABLE and is
 * retried later (the run stays SUBMITTED).
 */
@Injectable()
export class UsageLedgerService implements OnModuleInit, OnModuleDestroy {
  private readonly ledger = new UsageLedger();
  private readonly decoder = new TextDecoder();
  private messages: ConsumerMessages | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  private readonly waiters = new Set<() => void>();
  private lastPruneMs = 0;
  private caughtUp = false;
  private readonly startedAtMs = Date.now();
  private restartTimer: NodeJS.Timeout | null = null;

  constructor(
    @Inject(SERVICE_CONFIG) private readonly config: PolicyServiceConfig,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(EVIDENCE_LOG) private readonly log: EvidenceLog,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {}

  /** Starts the fold at boot, so the ledger is rebuilt before the first budgeted decision asks for it. */
  onModuleInit(): void {
    this.ensureRunning();
  }

  async onModuleDestroy(): Promise<void> {
    await this.stop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.restartTimer !== null) clearTimeout(this.restartTimer);
    const messages = this.messages;
    this.messages = null;
    await messages?.close().catch(() => undefined);
    await this.running?.catch(() => undefined);
    for (const wake of this.waiters) wake();
  }

  /** The last stream seq folded (0: none yet). */
  get throughStreamSeq(): number {
    return this.ledger.throughStreamSeq;
  }

  /**
   * The tenant's runs and sandbox sessions first seen before `chainId` — a run's or a sandbox's
   * chain — that count for a run of `job` decided at `nowMs`, once the fold has passed `chainId`'s
   * first receipt; E_UNAVAILABLE when it has not within CAIRN_POLICY_USAGE_WAIT_MS.
   */
  async earlierRuns(chainId: string, tenant: string, job: string | undefined, nowMs: number): Promise<RunUsageRecord[]> {
    this.ensureRunning();
    const first = await this.firstStreamSeqOf(chainId);
    if (nowMs - this.lastPruneMs >= PRUNE_EVERY_MS) {
      this.lastPruneMs = nowMs;
      this.ledger.prune(nowMs);
    }
    return this.ledger.earlier(tenant, job, first, nowMs);
  }

  private async firstStreamSeqOf(chainId: string): Promise<number> {
    const deadline = Date.now() + this.config.CAIRN_POLICY_USAGE_WAIT_MS;
    for (;;) {
      const entry = this.ledger.entry(chainId);
      if (entry !== undefined) return entry.firstStreamSeq;
      const left = deadline - Date.now();
      if (left <= 0 || this.stopped) {
        throw new CairnError('E_UNAVAILABLE', `policy's usage ledger has not reached ${chainId} yet (folded through stream seq ${this.ledger.throughStreamSeq}), so its budgets cannot be counted; retried later`, {
          runId: chainId,
        });
      }
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, Math.min(left, 1000));
        this.waiters.add(wake);
      });
    }
  }

  private ensureRunning(): void {
    if (this.running !== null || this.stopped) return;
    this.running = this.fold()
      .catch((error: unknown) => {
        if (this.stopped) return;
        this.logger.write('warn', 'usage ledger fold stopped; starting it again', { through_stream_seq: this.ledger.throughStreamSeq, error: error instanceof Error ? error.message : String(error) });
      })
      .finally(() => {
        this.running = null;
        this.messages = null;
        if (this.stopped) return;
        // Started again after the last seq folded; until then decisions wait (bounded) as for a slow fold.
        this.restartTimer = setTimeout(() => {
          this.restartTimer = null;
          this.ensureRunning();
        }, RESTART_MS);
      });
  }

  private async fold(): Promise<void> {
    const prefix = this.log.subjectPrefix;
    const from = this.ledger.throughStreamSeq + 1;
    const consumer = await jetstream(this.nc).consumers.get(this.log.streamName, {
      filter_subjects: evidenceSubjects(prefix),
      ...(from <= 1 ? { deliver_policy: DeliverPolicy.All } : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from }),
    });
    const messages = await consumer.consume({ max_messages: 1024, expires: CONSUMER_PULL_EXPIRES_MS });
    this.messages = messages;
    if (this.stopped) {
      await messages.close();
      return;
    }
    let folded = 0;
    for await (const msg of messages) {
      this.ledger.fold(this.receiptOf(prefix, msg.subject, msg.data, msg.seq), msg.seq);
      folded += 1;
      if (!this.caughtUp && msg.info.pending === 0) {
        this.caughtUp = true;
        this.logger.write('info', 'usage ledger rebuilt from the log', { messages: folded, entries: this.ledger.size, through_stream_seq: msg.seq, ms: Date.now() - this.startedAtMs });
      }
      for (const wake of [...this.waiters]) wake();
    }
  }

  /** The message's receipt when it is one the ledger may take: valid, on the subject of its own chain and type. */
  private receiptOf(prefix: string, subject: string, data: Uint8Array, streamSeq: number): EvidenceReceipt | null {
    const named = parseEvidenceSubject(prefix, subject);
    if (named === null || !FOLDED.has(named.type)) return null;
    let raw: unknown;
    try {
      raw = JSON.parse(this.decoder.decode(data));
    } catch {
      this.logger.write('warn', 'usage ledger skips a message that is not JSON', { subject, stream_seq: streamSeq });
      return null;
    }
    const parsed = parseEvidenceReceipt(raw);
    if (!parsed.ok || named.chainId !== parsed.receipt.run_id || named.type !== parsed.receipt.type) {
      // The reactors skip it too (nothing acts on it): it is never counted, as it is never decided.
      this.logger.write('warn', 'usage ledger skips an invalid receipt', { subject, stream_seq: streamSeq });
      return null;
    }
    return parsed.receipt;
  }
}
