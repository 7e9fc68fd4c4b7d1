import { CairnError, ImageRefSchema, SandboxDestroyReasonSchema, SandboxIdSchema, SandboxStateSchema } from '@cairn/contracts';
import type { Sandbox, SandboxList, SandboxState } from '@cairn/contracts';
import { ProjectionNotices, SANDBOX_SELECT_COLUMNS, sandboxRowFromDb } from '@cairn/persistence';
import type { SandboxDbRow } from '@cairn/persistence';
import type { SandboxView } from '@cairn/lifecycle';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { decodePageCursor, encodePageCursor } from '../runs/run-cursor.codec.js';
import { queryProjections } from '../runs/run-reads.repository.js';

/** How long a read waits for the projection to reach a sandbox answered from its chain. */
const CATCH_UP_WAIT_MS = 10_000;
/** Answered-ahead sandboxes remembered at most (the oldest is forgotten first). */
const MAX_ANSWERED_AHEAD = 10_000;
/** How often a wait for the projection reads it while the projector's notices arrive. */
const BACKSTOP_POLL_MS = 100;

/** A row as the REST view (the projector's own mapping, then the API's shapes); an unknown value fails loudly. */
export function toSandbox(row: SandboxDbRow): Sandbox {
  return sandboxFromView(sandboxRowFromDb(row).view);
}

/** A sandbox's view (folded from its chain, by the projector or by a caller) in the API's shapes. */
export function sandboxFromView(view: SandboxView): Sandbox {
  return {
    id: SandboxIdSchema.parse(view.id),
    tenant: view.tenant,
    state: SandboxStateSchema.parse(view.state),
    image: view.image === null ? null : ImageRefSchema.parse(view.image),
    imageId: view.imageId,
    caps: view.caps,
    network: view.network,
    workerId: view.workerId,
    createdAt: view.createdAt,
    readyAt: view.readyAt,
    expiresAt: view.expiresAt,
    idleSeconds: view.idleSeconds,
    lastActivityAt: view.lastActivityAt,
    operations: view.operations,
    destroyReason: view.destroyReason === null ? null : SandboxDestroyReasonSchema.parse(view.destroyReason),
    errorCode: view.errorCode,
    headSeq: view.headSeq,
    headHash: view.headHash,
    sealed: view.sealed,
  };
}

/**
 * Reads of the `sandboxes` projection the projector writes: plain SQL, read only, every read
 * scoped to the caller's tenant (another tenant's sandbox is not there: 404).
 */
@Injectable()
export class SandboxReadsRepository {
  /**
   * Sandboxes this gateway answered from their chains (a create), until the projection is seen to
   * hold what was answered: a read of one waits for that (bounded), so what a caller was told is
   * never contradicted by a read right after it (read your writes, in one gateway process).
   */
  private readonly answeredAhead = new Map<string, { tenant: string; seq: number; until: number }>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly notices: ProjectionNotices,
  ) {}

  /** Records that a caller was answered receipt `seq` of the sandbox before the projection held it. */
  answered(tenant: string, sandboxId: string, seq: number): void {
    const now = Date.now();
    for (const [id, entry] of this.answeredAhead) {
      if (entry.until > now && this.answeredAhead.size < MAX_ANSWERED_AHEAD) break;
      this.answeredAhead.delete(id);
    }
    this.answeredAhead.set(sandboxId, { tenant, seq, until: now + CATCH_UP_WAIT_MS });
  }

  /** The sandbox, or null when it is unknown or another tenant's (the caller answers 404 for both). */
  async findSandbox(tenant: string, sandboxId: string): Promise<Sandbox | null> {
    const ahead = this.answeredAhead.get(sandboxId);
    if (ahead !== undefined && ahead.tenant === tenant) {
      const view = await this.waitForSeq(tenant, sandboxId, ahead.seq, Math.max(0, ahead.until - Date.now()));
      // Caught up (or given up on: past the wait, what is projected is what there is).
      if (this.answeredAhead.get(sandboxId) === ahead) this.answeredAhead.delete(sandboxId);
      if (view !== null) return view;
    }
    return this.projected(tenant, sandboxId);
  }

  private async projected(tenant: string, sandboxId: string): Promise<Sandbox | null> {
    const [row] = await queryProjections<SandboxDbRow>(this.dataSource, `SELECT ${SANDBOX_SELECT_COLUMNS} FROM sandboxes WHERE sandbox_id = $1 AND tenant = $2`, [
      sandboxId,
      tenant,
    ]);
    return row === undefined ? null : toSandbox(row);
  }

  async getSandbox(tenant: string, sandboxId: string): Promise<Sandbox> {
    const sandbox = await this.findSandbox(tenant, sandboxId);
    if (sandbox === null) throw new CairnError('E_NOT_FOUND', `no sandbox ${sandboxId}`, { sandboxId });
    return sandbox;
  }

  /** Newest first, by (created_at, sandbox_id) — the order of the `ix_sandboxes_tenant_created` index. */
  async listSandboxes(tenant: string, options: { limit: number; cursor?: string | undefined; state?: SandboxState | undefined }): Promise<SandboxList> {
    // What this gateway answered ahead of the projection is listed as answered.
    for (const [sandboxId, entry] of [...this.answeredAhead]) if (entry.tenant === tenant) await this.findSandbox(tenant, sandboxId);
    const parameters: unknown[] = [tenant];
    const where = ['tenant = $1'];
    if (options.state !== undefined) {
      parameters.push(options.state);
      where.push(`state = $${parameters.length}`);
    }
    if (options.cursor !== undefined) {
      const cursor = decodePageCursor(options.cursor, SandboxIdSchema);
      parameters.push(cursor.createdAt, cursor.id);
      where.push(`(created_at, sandbox_id) < ($${parameters.length - 1}::timestamptz, $${parameters.length})`);
    }
    parameters.push(options.limit + 1);
    const rows = await queryProjections<SandboxDbRow>(
      this.dataSource,
      `SELECT ${SANDBOX_SELECT_COLUMNS} FROM sandboxes WHERE ${where.join(' AND ')} ORDER BY created_at DESC, sandbox_id DESC LIMIT $${parameters.length}`,
      parameters,
    );
    const items = rows.slice(0, options.limit).map(toSandbox);
    const last = items.at(-1);
    const more = rows.length > options.limit;
    return { items, nextCursor: more && last !== undefined ? encodePageCursor({ createdAt: last.createdAt, id: last.id }) : null };
  }

  /**
   * Waits (at most `timeoutMs`) until the projection holds the sandbox's receipt `seq` (the one an
   * operation just appended), so the answer that follows reads its own write. Null when it did not
   * get there in time.
   */
  async waitForSeq(tenant: string, sandboxId: string, seq: number, timeoutMs: number): Promise<Sandbox | null> {
    return this.waitFor(tenant, sandboxId, seq, timeoutMs, (sandbox) => sandbox.headSeq >= seq);
  }

  /**
   * Reads the sandbox until `done` holds (null past `timeoutMs`): again when the projector says it
   * has committed the sandbox's receipt `seq` or later, and every BACKSTOP_POLL_MS in any case (a
   * notice lost with its connection costs that much, nothing more). Without notices it polls often.
   */
  async waitFor(tenant: string, sandboxId: string, seq: number, timeoutMs: number, done: (sandbox: Sandbox) => boolean): Promise<Sandbox | null> {
    const started = Date.now();
    const deadline = started + timeoutMs;
    for (;;) {
      // Registered before the read: a commit that lands during the read still wakes the next one.
      const interval = this.notices.live ? BACKSTOP_POLL_MS : Date.now() - started < 50 ? 2 : 10;
      const wake = this.notices.after(sandboxId, seq, Math.max(0, Math.min(interval, deadline - Date.now())));
      const sandbox = await this.projected(tenant, sandboxId);
      if (sandbox !== null && done(sandbox)) {
        wake.cancel();
        return sandbox;
      }
      if (Date.now() >= deadline) {
        wake.cancel();
        return null;
      }
      await wake.reached;
    }
  }
}
