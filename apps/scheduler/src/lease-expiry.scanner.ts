import { eventId } from '@cairn/contracts';
import type { EvidenceReceiptOf, ReceiptEnvelope } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import { isHeadMoved, isNotAReceipt } from '@cairn/evidence-log';
import { CANCEL_ANSWER_KEY, isTerminal, lostWorkerRecord, pendingCancelRequest, readSandboxChain, readValidRunChain, retriesOf } from '@cairn/lifecycle';
import { LeaseStore } from '@cairn/operational';
import type { LeaseRecord } from '@cairn/operational';
import { isExpired } from '@cairn/scheduling';
import { EVIDENCE_LOG, JsonLogger, PeriodicTask, recordChainBreak, SERVICE_CONFIG, SERVICE_LOGGER, SERVICE_NAME } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import type { SchedulerConfig } from './scheduler.config.js';

/** States in which a run's worker is (or is about to be) running it: losing the worker loses the run. */
const HELD_BY_WORKER = new Set(['SCHEDULED', 'RUNNING', 'AWAITING_APPROVAL']);

export type LeaseVerdict = 'failed' | 'retried' | 'cancelled' | 'released' | 'kept';

/**
 * Every `CAIRN_LEASE_SCAN_INTERVAL_MS`, looks for expired leases. The run of an expired lease that
 * its worker held (scheduled, running, or paused for a step approval) is failed with
 * `E_WORKER_LOST`, caused by its `run.scheduled`; a step is never run twice unasked — unless its
 * RunSpec opted into retries and some are left: then `run.retried` gives it back to the queue
 * (ADR 0035), and the scheduler places the next attempt. One with a cancel pending is cancelled
 * instead (`run.cancelled` `E_WORKER_LOST`), whatever retries it has. Leases of runs that have
 * ended or moved past their worker, and leases never announced, are released.
 */
@Injectable()
export class LeaseExpiryScanner implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly task: PeriodicTask;

  constructor(
    private readonly leases: LeaseStore,
    @Inject(EVIDENCE_LOG) private readonly log: EvidenceLog,
    @Inject(SERVICE_NAME) private readonly service: string,
    @Inject(SERVICE_CONFIG) private readonly config: SchedulerConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {
    this.task = new PeriodicTask(config.CAIRN_LEASE_SCAN_INTERVAL_MS, () => this.scan(), (error) => logger.write('error', 'lease scan failed; will scan again', { error: String(error) }));
  }

  onApplicationBootstrap(): void {
    this.task.start();
  }

  /** Before the NATS connection drains: no new scan, and the one under way finishes. */
  async onModuleDestroy(): Promise<void> {
    await this.task.stop();
  }

  /** One pass over the lease store; returns what happened to each expired lease. */
  async scan(now: number = Date.now()): Promise<Map<string, LeaseVerdict>> {
    const verdicts = new Map<string, LeaseVerdict>();
    for (const listed of await this.leases.list()) {
      if (this.task.stopped) break;
      if (!isExpired(listed, now)) continue;
      try {
        // Listed from memory, which may trail a renewal by a moment: act on the lease as stored now.
        const lease = await this.leases.get(listed.run_id);
        if (lease === null || !isExpired(lease, now)) continue;
        verdicts.set(lease.run_id, await this.expired(lease));
      } catch (error) {
        this.logger.write('error', 'could not settle an expired lease; will retry', { run_id: listed.run_id, error: String(error) });
      }
    }
    return verdicts;
  }

  private async expired(lease: LeaseRecord): Promise<LeaseVerdict> {
    const raw = await this.chainOf(lease.run_id);
    if (lease.run_id.startsWith('sbx_')) return this.expiredSandbox(lease, raw);
    const chain = readValidRunChain(raw);
    if (chain === null) {
      this.logger.write('warn', 'an expired lease of a chain that does not validate is kept', { run_id: lease.run_id });
      return 'kept';
    }
    const { view, receipts } = chain;
    const scheduled = receipts.findLast((r): r is EvidenceReceiptOf<'run.scheduled'> => r.type === 'run.scheduled' && r.lease_id === lease.lease_id);
    if (view === null || view.sealed || isTerminal(view.state) || scheduled === undefined || !HELD_BY_WORKER.has(view.state)) {
      await this.leases.delete(lease.run_id, lease.lease_id);
      return 'released';
    }
    // Appended onto the head just read: if the runtime wrote meanwhile (it is alive after all, or
    // answered a cancel), nothing is stored and the next scan decides again.
    const headSeq = raw.at(-1)?.seq ?? 0;
    try {
      const cancel = pendingCancelRequest(receipts, view);
      if (cancel !== null) {
        await this.cancelLostRun(lease, view.tenant, cancel, headSeq);
        return 'cancelled';
      }
      return await this.failLostRun(lease, view.tenant, scheduled, headSeq, retriesOf(receipts));
    } catch (error) {
      if (!isHeadMoved(error)) throw error;
      this.logger.write('info', 'an expired lease\'s chain moved while it was settled; scanning again later', { run_id: lease.run_id });
      return 'kept';
    }
  }

  /**
   * The chain's receipts. One whose subjects hold a message that is not a receipt is first stopped
   * on the record (`recordChainBreak`, ADR 0033: alert.raised and run.failed E_CHAIN_BROKEN, unless
   * someone did already), then read past it — so the lease of its run is released, not retried at
   * every scan for ever.
   */
  private async chainOf(chainId: string): Promise<ReceiptEnvelope[]> {
    const raw: ReceiptEnvelope[] = [];
    try {
      for await (const stored of this.log.readChain(chainId)) raw.push(stored.receipt);
      return raw;
    } catch (error) {
      if (!isNotAReceipt(error)) throw error;
      await recordChainBreak({ log: this.log, actor: this.service, logger: this.logger }, chainId);
      return (await this.log.readChainPastBreaks(chainId)).receipts.map((stored) => stored.receipt);
    }
  }

  /**
   * A sandbox session whose worker stopped renewing its lease: nobody serves it any more, so it
   * ends `E_WORKER_LOST` (caused by its `run.scheduled`); the grader then seals it. An ended one's
   * lease is only released.
   */
  private async expiredSandbox(lease: LeaseRecord, raw: ReceiptEnvelope[]): Promise<LeaseVerdict> {
    const chain = readSandboxChain(raw);
    if (chain === null || chain.view === null) {
      this.logger.write('warn', 'an expired lease of a sandbox chain that does not validate is kept', { sandbox_id: lease.run_id });
      return 'kept';
    }
    const { view, receipts } = chain;
    const scheduled = receipts.findLast((r): r is EvidenceReceiptOf<'run.scheduled'> => r.type === 'run.scheduled' && r.lease_id === lease.lease_id);
    if (view.sealed || scheduled === undefined || (view.state !== 'PENDING' && view.state !== 'READY')) {
      await this.leases.delete(lease.run_id, lease.lease_id);
      return 'released';
    }
    try {
      // A sandbox session is never retried: its state lives in the sandbox that was lost.
      return await this.failLostRun(lease, view.tenant, scheduled, view.headSeq, 0);
    } catch (error) {
      if (!isHeadMoved(error)) throw error;
      return 'kept';
    }
  }

  /**
   * The run's worker is gone with a cancel asked of it: nobody is left to stop the sandbox, so the
   * scheduler answers the request — the same logical `run.cancelled` the runtime would append
   * (caused by the request, `CANCEL_ANSWER_KEY`), with `E_WORKER_LOST` saying the teardown is not
   * on the record.
   */
  private async cancelLostRun(lease: LeaseRecord, tenant: string, cancel: EvidenceReceiptOf<'run.cancel_requested'>, headSeq: number): Promise<void> {
    await this.log.append(
      lease.run_id,
      {
        type: 'run.cancelled',
        actor: this.service,
        tenant,
        causation: eventId(lease.run_id, cancel.seq),
        key: CANCEL_ANSWER_KEY,
        fields: {
          cancelled_by: cancel.requested_by,
          ...(cancel.reason === undefined ? {} : { reason: cancel.reason }),
          error_code: 'E_WORKER_LOST',
        },
      },
      { expectedHeadSeq: headSeq },
    );
    await this.leases.delete(lease.run_id, lease.lease_id);
    this.logger.write('warn', 'worker lost with a cancel pending: run cancelled', { run_id: lease.run_id, worker_id: lease.worker_id, lease_id: lease.lease_id });
  }

  /**
   * `run.failed` `E_WORKER_LOST`, or `run.retried` while the RunSpec's retries allow another attempt
   * (keyed `retried-<attempt>`, as the runtime's restart keys it, so the two store one).
   */
  private async failLostRun(lease: LeaseRecord, tenant: string, scheduled: EvidenceReceiptOf<'run.scheduled'>, headSeq: number, retries: number): Promise<LeaseVerdict> {
    const lost = `worker ${lease.worker_id} lost: lease ${lease.lease_id} (attempt ${lease.attempt}) expired at ${lease.expires_at}`;
    const record = lostWorkerRecord(retries, lease, lost);
    await this.log.append(
      lease.run_id,
      {
        type: record.type,
        actor: this.service,
        tenant,
        causation: eventId(lease.run_id, scheduled.seq),
        key: record.type === 'run.retried' ? record.key : `lease-expired-${lease.attempt}`,
        fields: record.fields,
      },
      { expectedHeadSeq: headSeq },
    );
    // The lost attempt's lease only: the next attempt's, if the scheduler placed it already, stays.
    await this.leases.delete(lease.run_id, lease.lease_id);
    const message = record.type === 'run.retried' ? `worker lost: run retried (${record.fields.retries_left} retries left after the next attempt)` : 'worker lost: run failed';
    this.logger.write('warn', message, { run_id: lease.run_id, worker_id: lease.worker_id, lease_id: lease.lease_id, attempt: lease.attempt });
    return record.type === 'run.retried' ? 'retried' : 'failed';
  }
}
