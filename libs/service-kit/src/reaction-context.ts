import { CairnError, EVENT_BODY_SCHEMAS, eventId, isEventType } from '@cairn/contracts';
import type { EventType, EvidenceReceipt } from '@cairn/contracts';
import type { AppendResult, EvidenceLog } from '@cairn/evidence-log';

/**
 * What a handler gets for one receipt: the receipt, and appends that land on the same chain
 * with this receipt as their causation and the service as their actor. Because the causation
 * and type (and key) fix the message id, a handler that runs twice for the same receipt — a
 * redelivery after a crash — stores each reaction once (docs/adr/0003).
 */
export class ReactionContext {
  readonly eventId: string;

  constructor(
    readonly receipt: EvidenceReceipt,
    readonly service: string,
    private readonly log: EvidenceLog,
    private readonly onWorking: () => void,
  ) {
    this.eventId = eventId(receipt.run_id, receipt.seq);
  }

  get chainId(): string {
    return this.receipt.run_id;
  }

  /**
   * Appends `type` with `fields` to this receipt's chain, caused by it. The fields are checked
   * against the event's contract first: a service can never put a malformed event on a chain.
   */
  async append(type: EventType, fields: Record<string, unknown>, key?: string): Promise<AppendResult> {
    checkFields(type, this.receipt, this.service, fields);
    return this.log.append(this.chainId, {
      type,
      actor: this.service,
      tenant: this.receipt.tenant,
      causation: this.eventId,
      fields,
      ...(key === undefined ? {} : { key }),
    });
  }

  /** Tells JetStream the handler is still busy (long steps), so the message is not redelivered. */
  working(): void {
    this.onWorking();
  }

  /** The chain's receipts as stored, from seq 1 to its head now. */
  async readChain(): Promise<unknown[]> {
    const receipts: unknown[] = [];
    for await (const stored of this.log.readChain(this.chainId)) receipts.push(stored.receipt);
    return receipts;
  }
}

/** Validates `fields` as the body of `type` with a stand-in envelope (seq and ts are the log's). */
function checkFields(type: string, cause: EvidenceReceipt, actor: string, fields: Record<string, unknown>): void {
  if (!isEventType(type)) throw new CairnError('E_UNKNOWN_STATE', `no contract for event type ${type}`);
  const probe = {
    v: 1,
    seq: cause.seq + 1,
    run_id: cause.run_id,
    tenant: cause.tenant,
    type,
    actor,
    ts: '2000-01-01T00:00:00.000Z',
    causation: eventId(cause.run_id, cause.seq),
    ...fields,
  };
  const parsed = EVENT_BODY_SCHEMAS[type].safeParse(probe);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new CairnError('E_INTERNAL', `${actor} built an invalid ${type}: ${issues.join('; ')}`, { type, issues });
  }
}
