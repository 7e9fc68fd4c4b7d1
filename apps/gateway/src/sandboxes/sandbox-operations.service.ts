import { CairnError, ErrorCodeSchema, hasScope } from '@cairn/contracts';
import type { ExecRequest, ExecResult, FileWrittenAnswer, Sandbox, SandboxSpec } from '@cairn/contracts';
import { KeyedSerialQueue } from '@cairn/evidence-log';
import { readSandboxChain } from '@cairn/lifecycle';
import type { ExecOutcome, OutputStream, SandboxCaller, SandboxSessions } from '@cairn/sandbox-sessions';
import { Inject, Injectable } from '@nestjs/common';
import type { Principal } from '../auth/api-key.store.js';
import { sandboxFromView, SandboxReadsRepository } from './sandbox-reads.repository.js';
import { GATEWAY_SANDBOX_SESSIONS } from './sandbox-sessions.token.js';

/** How long a create waits for the sandbox to be ready (policy, scheduling, the container's start), past any `waitSeconds` in the queue. */
export const CREATE_TIMEOUT_MS = 60_000;
/** How long an answer waits for the projection to show what the operation appended. */
const PROJECTION_WAIT_MS = 10_000;

/** What an exec answers besides its output: the contract's ExecResult without stdout and stderr. */
export type ExecSummary = Omit<ExecResult, 'stdout' | 'stderr'>;

const LOSSY_UTF8 = new TextDecoder('utf-8');

function actorOf(principal: Principal): string {
  return `key:${principal.keyId}`;
}

/** The caller of an operation: a sandbox that mounts secrets takes them from its creator or an admin key only. */
function callerOf(principal: Principal): SandboxCaller {
  return { tenant: principal.tenant, actor: actorOf(principal), admin: hasScope(principal.scopes, 'admin') };
}

/** The outcome of an exec as the REST answer summarises it (the bytes go out separately). */
export function execSummary(outcome: ExecOutcome): ExecSummary {
  return {
    execId: outcome.execId,
    exitCode: outcome.exitCode,
    stdoutBytes: outcome.stdoutBytes,
    stderrBytes: outcome.stderrBytes,
    stdoutSha256: outcome.stdoutSha256,
    stderrSha256: outcome.stderrSha256,
    truncated: outcome.truncated,
    durationMs: outcome.durationMs,
    limitHit: outcome.limitHit,
    errorCode: outcome.errorCode === null ? null : ErrorCodeSchema.parse(outcome.errorCode),
    seq: outcome.seq,
    sandboxState: outcome.sandboxDestroyed ? 'DESTROYED' : 'READY',
  };
}

/** The whole JSON answer of an exec: its output as UTF-8 text (invalid bytes replaced). */
export function execResult(outcome: ExecOutcome): ExecResult {
  return { ...execSummary(outcome), stdout: LOSSY_UTF8.decode(outcome.stdout), stderr: LOSSY_UTF8.decode(outcome.stderr) };
}

/**
 * The gateway's side of interactive sandbox sessions: each operation goes to the sessions backend,
 * which decides from the sandbox's chain — not the projection, which may trail a sandbox created a
 * moment ago — whether it is the caller's tenant's (else 404) and READY (else 409), and records it
 * there. Operations on one sandbox run one at a time, in arrival order: a second request waits its
 * turn rather than being refused.
 */
@Injectable()
export class SandboxOperations {
  private readonly perSandbox = new KeyedSerialQueue();

  constructor(
    @Inject(GATEWAY_SANDBOX_SESSIONS) private readonly sessions: SandboxSessions,
    private readonly reads: SandboxReadsRepository,
  ) {}

  async create(principal: Principal, spec: SandboxSpec, idempotencyKey: string | undefined, signal?: AbortSignal): Promise<Sandbox> {
    const ready = await this.sessions.create(
      {
        tenant: principal.tenant,
        requestedBy: actorOf(principal),
        principal: { key_id: principal.keyId, scopes: [...principal.scopes] },
        spec,
        ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
      },
      CREATE_TIMEOUT_MS + (spec.waitSeconds ?? 0) * 1000,
      signal === undefined ? {} : { signal },
    );
    // A create answered before may have been used and destroyed since: its view as it is now.
    if (ready.duplicate) return this.viewAt(principal.tenant, ready.sandboxId, ready.seq);
    // A new one is answered from the chain the wait followed, folded as the projector folds it,
    // not once the projector has caught up. Reads through this gateway wait for the projection to
    // reach what it answered, so a GET or a list right after still shows the sandbox READY.
    const view = readSandboxChain(ready.receipts)?.view ?? null;
    if (view === null || view.state !== 'READY') {
      throw new CairnError('E_UNKNOWN_STATE', `sandbox ${ready.sandboxId} was reported ready, but its chain does not fold to READY`, { sandboxId: ready.sandboxId });
    }
    this.reads.answered(principal.tenant, ready.sandboxId, view.headSeq);
    return sandboxFromView(view);
  }

  exec(principal: Principal, sandboxId: string, request: ExecRequest, onOutput?: (stream: OutputStream, chunk: Uint8Array) => void): Promise<ExecOutcome> {
    return this.perSandbox.run(sandboxId, () =>
      this.sessions.exec(
        sandboxId,
        callerOf(principal),
        {
          argv: request.argv,
          ...(request.env === undefined ? {} : { env: request.env }),
          ...(request.workdir === undefined ? {} : { workdir: request.workdir }),
          ...(request.stdin === undefined ? {} : { stdin: new TextEncoder().encode(request.stdin) }),
          ...(request.stdinBase64 === undefined ? {} : { stdin: new Uint8Array(Buffer.from(request.stdinBase64, 'base64')) }),
          ...(request.timeoutSeconds === undefined ? {} : { timeoutSeconds: request.timeoutSeconds }),
        },
        onOutput,
      ),
    );
  }

  async writeFile(principal: Principal, sandboxId: string, path: string, content: Uint8Array, mode: number | undefined): Promise<FileWrittenAnswer> {
    const written = await this.perSandbox.run(sandboxId, () => this.sessions.writeFile(sandboxId, callerOf(principal), path, content, mode));
    return { path: written.path, bytes: written.bytes, sha256: written.sha256, seq: written.seq };
  }

  readFile(principal: Principal, sandboxId: string, path: string) {
    return this.perSandbox.run(sandboxId, () => this.sessions.readFile(sandboxId, callerOf(principal), path));
  }

  /** Idempotent: a sandbox that has ended answers its view as it is. */
  destroy(principal: Principal, sandboxId: string): Promise<Sandbox> {
    return this.perSandbox.run(sandboxId, async () => {
      // Decided on the chain (404 for another tenant's, nothing to do for an ended one), then answered from the projection.
      await this.sessions.destroy(sandboxId, principal.tenant, actorOf(principal));
      return this.viewEnded(principal.tenant, sandboxId);
    });
  }

  /** The view once the projection holds receipt `seq`. */
  private async viewAt(tenant: string, sandboxId: string, seq: number): Promise<Sandbox> {
    const view = await this.reads.waitForSeq(tenant, sandboxId, seq, PROJECTION_WAIT_MS);
    if (view === null) throw new CairnError('E_UNAVAILABLE', `sandbox ${sandboxId} is ready but not projected yet: GET /v1/sandboxes/${sandboxId} shortly`, { sandboxId });
    return view;
  }

  /** The view once the projection shows the sandbox ended. */
  private async viewEnded(tenant: string, sandboxId: string): Promise<Sandbox> {
    // Through findSandbox first: a sandbox this gateway answered ahead of the projection is waited for there.
    const now = await this.reads.findSandbox(tenant, sandboxId);
    const ended = (view: Sandbox) => view.state !== 'READY' && view.state !== 'PENDING';
    if (now !== null && ended(now)) return now;
    // Woken by each commit of the sandbox's receipts past what was read.
    const view = await this.reads.waitFor(tenant, sandboxId, (now?.headSeq ?? 0) + 1, PROJECTION_WAIT_MS, ended);
    if (view === null) {
      throw new CairnError('E_UNAVAILABLE', `sandbox ${sandboxId} is destroyed but not projected yet: GET /v1/sandboxes/${sandboxId} shortly`, { sandboxId });
    }
    return view;
  }
}
