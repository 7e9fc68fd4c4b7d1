import { ApprovalIdSchema, CairnError, isCairnError, RunIdSchema, TimestampSchema } from '@cairn/contracts';
import { DEFAULT_NATS_REPLICAS } from '@cairn/config';
import { APPROVAL_DEADLINES_LIMITS, bucketStreamName, openBucket } from '@cairn/operational';
import { jetstreamManager, JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';

/** When an approval request stops waiting: `approval.requested` as the scheduler's timer needs it. */
export const ApprovalDeadlineSchema = z.strictObject({
  run_id: RunIdSchema,
  approval_id: ApprovalIdSchema,
  expires_at: TimestampSchema,
  /** The chain seq of the request: a timeout's `approval.rejected` is caused by it. */
  requested_seq: z.number().int().min(1),
});
export type ApprovalDeadline = z.infer<typeof ApprovalDeadlineSchema>;

const BUCKET_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const LIMITS = APPROVAL_DEADLINES_LIMITS;

/**
 * Pending approval requests and their deadlines, in a KV bucket (operational state, like leases:
 * the request and the timeout's rejection are evidence, this index is not). The scheduler's
 * reactor writes an entry for each `approval.requested` and removes it when the approval is
 * decided or the run ends; its timer scans the entries for deadlines that have passed. The bucket
 * is created with the first entry, so a stack that never holds a run has none.
 */
export class ApprovalDeadlines {
  private kv: Promise<KV> | null = null;
  private jsm: Promise<JetStreamManager> | null = null;

  constructor(
    private readonly nc: NatsConnection,
    readonly bucket: string,
    /** The bucket's replicas (CAIRN_NATS_REPLICAS) when it is created; one with others is refused. */
    private readonly replicas: number = DEFAULT_NATS_REPLICAS,
  ) {
    if (!BUCKET_NAME.test(bucket)) throw new CairnError('E_INPUT', `invalid bucket name ${JSON.stringify(bucket)}: [A-Za-z0-9_-], at most 64`);
  }

  async put(deadline: ApprovalDeadline): Promise<void> {
    const checked = ApprovalDeadlineSchema.parse(deadline);
    const kv = await this.open();
    await call(`cannot record the deadline of ${checked.run_id} ${checked.approval_id}`, () => kv.put(keyOf(checked), JSON.stringify(checked)));
  }

  async delete(runId: string, approvalId: string): Promise<void> {
    if (!(await this.exists())) return;
    const kv = await this.open();
    await call(`cannot remove the deadline of ${runId} ${approvalId}`, () => kv.delete(`${runId}.${approvalId}`));
  }

  /** Removes every deadline of a run (it ended); true when there was one. */
  async deleteRun(runId: string): Promise<boolean> {
    const mine = (await this.list()).filter((d) => d.run_id === runId);
    for (const deadline of mine) await this.delete(deadline.run_id, deadline.approval_id);
    return mine.length > 0;
  }

  /** Every recorded deadline; none when the bucket does not exist yet. */
  async list(): Promise<ApprovalDeadline[]> {
    if (!(await this.exists())) return [];
    const kv = await this.open();
    const deadlines: ApprovalDeadline[] = [];
    for (const key of await this.keys()) {
      const entry = await call(`cannot read the deadline ${key}`, () => kv.get(key));
      if (entry === null || entry.operation !== 'PUT') continue;
      const parsed = ApprovalDeadlineSchema.safeParse(safeJson(entry.string()));
      if (parsed.success) deadlines.push(parsed.data);
    }
    return deadlines;
  }

  private open(): Promise<KV> {
    this.kv ??= openBucket(this.nc, this.bucket, LIMITS, this.replicas).catch((error: unknown) => {
      this.kv = null;
      throw error;
    });
    return this.kv;
  }

  private manager(): Promise<JetStreamManager> {
    this.jsm ??= jetstreamManager(this.nc);
    return this.jsm;
  }

  private async exists(): Promise<boolean> {
    if (this.kv !== null) return true;
    try {
      await (await this.manager()).streams.info(bucketStreamName(this.bucket));
      return true;
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return false;
      throw new CairnError('E_UNAVAILABLE', `cannot read the KV bucket ${this.bucket}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** Keys from the stream's subject index (one request; see `keyLister` in @cairn/operational for why). */
  private async keys(): Promise<string[]> {
    const prefix = `$KV.${this.bucket}.`;
    const info = await call(`cannot list ${this.bucket}`, async () =>
      (await this.manager()).streams.info(bucketStreamName(this.bucket), { subjects_filter: `${prefix}>` }),
    );
    return Object.keys(info.state.subjects ?? {})
      .filter((subject) => subject.startsWith(prefix))
      .map((subject) => subject.slice(prefix.length))
      .sort();
  }
}

function keyOf(deadline: ApprovalDeadline): string {
  return `${deadline.run_id}.${deadline.approval_id}`;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (isCairnError(error)) throw error;
    throw new CairnError('E_UNAVAILABLE', `${what}: ${error instanceof Error ? error.message : String(error)}`);
  }
}
