import { CairnError, EVENT_BODY_SCHEMAS, eventId, isEventType } from '@cairn/contracts';
import type { EventType, EvidenceReceipt } from '@cairn/contracts';
import { isHeadMoved, isNotAReceipt } from '@cairn/evidence-log';
import type { AppendResult, EvidenceLog } from '@cairn/evidence-log';
import { decideChainBreak } from './chain-break.js';

/** A chain as a reaction read it: its receipts as stored, and the seq of its head then (0: empty). */
export interface ChainSnapshot {
  readonly receipts: unknown[];
  readonly headSeq: number;
}

/**
 * How the receipt reached the service: its stream seq and message id, and whether the consumer had
 * nothing stored after it then (`pending` 0) — the receipt was the newest message of the whole log.
 */
export interface Delivery {
  readonly streamSeq: number;
  readonly msgId: string;
  readonly latest: boolean;
}

/** Reads per `reactOnChain` before a chain that keeps moving is left to the reactor's redelivery. */
const DEFAULT_MAX_READS = 5;

/**
 * What a handler gets for one receipt: the receipt, and appends that land on the same chain
 * with this receipt as their causation and the service as their actor. Because the causation
 * and type (and key) fix the message id, a handler that runs twice for the same receipt — a
 * redelivery after a crash — stores each reaction once (docs/adr/0003).
 */
export class ReactionContext {
  readonly eventId: string;
  /**
   * Whether the chain as delivered may still serve: only as this context's first look at its chain,
   * before it appended anything — a long reaction (a run's steps) must read what is stored now.
   */
  private firstLook = true;
  /**
   * Set once this context read its chain past a message that is not a receipt whose break is
   * answered on the record (the run has ended): its appends then go past such a message too —
   * only what may follow an ending (a seal, a teardown's record) is ever decided from there.
   */
  private pastBreaks = false;

  constructor(
    readonly receipt: EvidenceReceipt,
    readonly service: string,
    private readonly log: EvidenceLog,
    private readonly onWorking: () => void,
    private readonly delivery?: Delivery,
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
    this.firstLook = false;
    checkFields(type, this.receipt, this.service, fields);
    return this.log.append(this.chainId, this.input(type, fields, key), this.pastBreaks ? { pastBreaks: true } : {});
  }

  /**
   * `append`, guarded: stored only while the chain's head is still `expectedSeq` — the head this
   * reaction decided from. If another writer (a cancel, say) moved it, nothing is stored and it
   * fails E_CONFLICT `head_moved` (`isHeadMoved`); the same event stored already is returned as a
   * duplicate, as with `append`.
   */
  async appendAt(expectedSeq: number, type: EventType, fields: Record<string, unknown>, key?: string): Promise<AppendResult> {
    this.firstLook = false;
    checkFields(type, this.receipt, this.service, fields);
    return this.log.append(this.chainId, this.input(type, fields, key), { expectedHeadSeq: expectedSeq, ...(this.pastBreaks ? { pastBreaks: true } : {}) });
  }

  /**
   * `appendAt` for receipts that belong together: appended as one atomic batch onto `expectedSeq`,
   * all of them or none (docs/adr/0012); each is checked against its contract first.
   */
  async appendAllAt(expectedSeq: number, items: readonly { type: EventType; fields: Record<string, unknown>; key?: string }[]): Promise<AppendResult[]> {
    this.firstLook = false;
    for (const item of items) checkFields(item.type, this.receipt, this.service, item.fields);
    return this.log.appendBatch(
      this.chainId,
      items.map((item) => this.input(item.type, item.fields, item.key)),
      { expectedHeadSeq: expectedSeq, ...(this.pastBreaks ? { pastBreaks: true } : {}) },
    );
  }

  /**
   * Read-decide-append without the race (docs/adr/0003): reads the chain and lets `react` decide
   * from it and append with `appendAt(chain.headSeq, …)` (each later append guarded on the seq
   * the one before returned). When another writer moved the head in between, reads again and
   * lets `react` decide again, so a decision never lands after an event it did not see. `react`
   * must be safe to run again (reactions are: their appends are idempotent). After `maxReads`
   * reads the conflict is thrown, and the reactor retries the receipt later.
   */
  async reactOnChain<T>(react: (chain: ChainSnapshot) => Promise<T>, maxReads = DEFAULT_MAX_READS): Promise<T> {
    for (let reads = 1; ; reads++) {
      const chain = reads === 1 ? await this.deliveredSnapshot() : await this.snapshot();
      try {
        return await react(chain);
      } catch (error) {
        if (!isHeadMoved(error) || reads >= maxReads) throw error;
      }
    }
  }

  /**
   * A context on another receipt of this chain, for a reaction that answers it: what is appended
   * through it is caused by that receipt (a `run.cancelled` answering a `run.cancel_requested`).
   */
  causedBy(receipt: EvidenceReceipt): ReactionContext {
    if (receipt.run_id !== this.chainId) {
      throw new CairnError('E_INTERNAL', `a reaction on ${this.chainId} cannot answer a receipt of ${receipt.run_id}`);
    }
    return new ReactionContext(receipt, this.service, this.log, this.onWorking);
  }

  /** Tells JetStream the handler is still busy (long steps), so the message is not redelivered. */
  working(): void {
    this.onWorking();
  }

  /** The chain's receipts as stored, from seq 1 to its head now. */
  async readChain(): Promise<unknown[]> {
    return (await this.snapshot()).receipts;
  }

  /**
   * The chain as it stood when this receipt was delivered, when nothing was stored after it then and
   * this process holds the chain up to it (its consumer saw every receipt before it): no read of the
   * stream. Otherwise the chain as stored now (`snapshot`). What a reaction decides from it is as
   * sound as from a read of the head: a later receipt could as well have landed just after that read,
   * and every append is guarded on the head the reaction saw, so a chain that moved is refused by the
   * compare-and-set (`reactOnChain` then reads the head and decides again).
   */
  async deliveredSnapshot(): Promise<ChainSnapshot> {
    const delivery = this.firstLook ? this.delivery : undefined;
    this.firstLook = false;
    if (delivery?.latest === true) {
      try {
        const held = this.log.chainThrough(this.chainId, this.receipt.seq, delivery.streamSeq, delivery.msgId);
        if (held !== null) return { receipts: held.map((stored) => stored.receipt), headSeq: this.receipt.seq };
      } catch (error) {
        if (!isNotAReceipt(error)) throw error;
      }
    }
    return this.snapshot();
  }

  /**
   * The chain as stored now, with its head's seq. A chain whose subjects hold a message that is
   * not a receipt fails E_CHAIN_BROKEN `not_a_receipt` (the reactor then stops the run on the
   * record: `recordChainBreak`) — unless that break is answered and the run has ended, when the
   * receipts are read past it, so the run can still be sealed and its teardown recorded (ADR 0033).
   */
  async snapshot(): Promise<ChainSnapshot> {
    this.firstLook = false;
    const receipts: unknown[] = [];
    let headSeq = 0;
    try {
      for await (const stored of this.log.readChain(this.chainId)) {
        receipts.push(stored.receipt);
        headSeq = stored.receipt.seq;
      }
    } catch (error) {
      if (!isNotAReceipt(error)) throw error;
      const past = await this.log.readChainPastBreaks(this.chainId);
      const read = past.receipts.map((stored) => stored.receipt);
      const decision = decideChainBreak(this.chainId, read, past.breaks);
      if (decision.kind !== 'answered' && decision.kind !== 'sealed') throw error;
      this.pastBreaks = true;
      return { receipts: read, headSeq: read.at(-1)?.seq ?? 0 };
    }
    return { receipts, headSeq };
  }

  private input(type: EventType, fields: Record<string, unknown>, key: string | undefined) {
    return { type, actor: this.service, tenant: this.receipt.tenant, causation: this.eventId, fields, ...(key === undefined ? {} : { key }) };
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
