import { eventId } from '@cairn/contracts';
import type { ReceiptEnvelope } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import { isHeadMoved } from '@cairn/evidence-log';
import { expiredApprovals, pendingApprovals, readValidRunChain } from '@cairn/lifecycle';
import { EVIDENCE_LOG, JsonLogger, PeriodicTask, SERVICE_CONFIG, SERVICE_LOGGER, SERVICE_NAME } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { ApprovalDeadlines } from './approval-deadlines.store.js';
import type { ApprovalDeadline } from './approval-deadlines.store.js';
import type { SchedulerConfig } from './scheduler.config.js';

export type ApprovalVerdict = 'timed_out' | 'settled' | 'kept';

/**
 * Every `CAIRN_APPROVAL_SCAN_INTERVAL_MS`, looks for approval requests past their `expires_at`
 * (PRODUCT.md: no decision before the approval's timeout ends the run CANCELLED, `E_NO_APPROVAL`).
 * A request still undecided on a run still waiting gets `approval.rejected` (`cause: timeout`,
 * `rejected_by` the scheduler), caused by the request and keyed by the approval's id, appended
 * onto the head it was decided from: a person's decision landing in between wins, and the next
 * scan finds nothing to do. Entries of approvals decided or runs that ended are removed.
 */
@Injectable()
export class ApprovalExpiryScanner implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly task: PeriodicTask;

  constructor(
    private readonly deadlines: ApprovalDeadlines,
    @Inject(EVIDENCE_LOG) private readonly log: EvidenceLog,
    @Inject(SERVICE_NAME) private readonly service: string,
    @Inject(SERVICE_CONFIG) private readonly config: SchedulerConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {
    this.task = new PeriodicTask(config.CAIRN_APPROVAL_SCAN_INTERVAL_MS, () => this.scan(), (error) => logger.write('error', 'approval scan failed; will scan again', { error: String(error) }));
  }

  onApplicationBootstrap(): void {
    this.task.start();
  }

  /** Before the NATS connection drains: no new scan, and the one under way finishes. */
  async onModuleDestroy(): Promise<void> {
    await this.task.stop();
  }

  /** One pass over the deadlines; what happened to each one that had passed. */
  async scan(now: number = Date.now()): Promise<Map<string, ApprovalVerdict>> {
    const verdicts = new Map<string, ApprovalVerdict>();
    for (const deadline of await this.deadlines.list()) {
      if (this.task.stopped) break;
      if (Date.parse(deadline.expires_at) > now) continue;
      const key = `${deadline.run_id}.${deadline.approval_id}`;
      try {
        verdicts.set(key, await this.expired(deadline, now));
      } catch (error) {
        this.logger.write('error', 'could not settle an expired approval; will retry', { run_id: deadline.run_id, approval_id: deadline.approval_id, error: String(error) });
      }
    }
    return verdicts;
  }

  private async expired(deadline: ApprovalDeadline, now: number): Promise<ApprovalVerdict> {
    const raw: ReceiptEnvelope[] = [];
    for await (const stored of this.log.readChain(deadline.run_id)) raw.push(stored.receipt);
    const chain = readValidRunChain(raw);
    if (chain === null) {
      this.logger.write('warn', 'an expired approval of a chain that does not validate is kept', { run_id: deadline.run_id });
      return 'kept';
    }
    const request = expiredApprovals(chain.view, chain.receipts, now).find((r) => r.approval_id === deadline.approval_id);
    if (request === undefined) {
      // Decided, superseded, or the run ended: nothing waits on this deadline any more.
      if (!pendingApprovals(chain.receipts).some((r) => r.approval_id === deadline.approval_id) || chain.view?.state !== 'AWAITING_APPROVAL') {
        await this.deadlines.delete(deadline.run_id, deadline.approval_id);
        return 'settled';
      }
      return 'kept';
    }
    const tenant = chain.view?.tenant ?? raw[0]?.tenant;
    if (tenant === undefined) return 'kept';
    try {
      await this.log.append(
        deadline.run_id,
        {
          type: 'approval.rejected',
          actor: this.service,
          tenant,
          causation: eventId(deadline.run_id, request.seq),
          key: request.approval_id,
          fields: { approval_id: request.approval_id, rejected_by: this.service, cause: 'timeout' },
        },
        { expectedHeadSeq: raw.at(-1)?.seq ?? 0 },
      );
    } catch (error) {
      if (!isHeadMoved(error)) throw error;
      this.logger.write('info', 'the chain moved while an approval timed out; scanning again later', { run_id: deadline.run_id });
      return 'kept';
    }
    await this.deadlines.delete(deadline.run_id, deadline.approval_id);
    this.logger.write('warn', 'approval timed out: run cancelled', { run_id: deadline.run_id, approval_id: deadline.approval_id, expires_at: request.expires_at });
    return 'timed_out';
  }
}
