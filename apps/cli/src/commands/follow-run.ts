import { CairnError, isCairnError } from '@cairn/contracts';
import type { OutputStream, Receipt } from '@cairn/contracts';
import { ChainVerifier } from '@cairn/evidence';
import type { RunView } from '@cairn/lifecycle';
import type { Cairn } from '@cairn/sdk';
import { usageError } from '../exit-codes.js';
import type { CliStreams, Output } from '../output.js';
import { foldReceipt, receiptProgressLine } from '../run-report.js';
import { chainBrokenError } from './verify.command.js';

/** A step's stream shown by `run --wait` is read whole first (and checked); a larger one is left to `cairn logs`. */
export const ECHO_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Shows each step's output as `docker run` would — its stdout on stdout, its stderr on stderr —
 * once its `step.completed` is on the chain: the bytes the artifact store holds, read back through
 * the gateway and checked against the sha256 that receipt records. An output that cannot be shown
 * is said on stderr; one whose bytes do not match is remembered (the command then exits 1).
 */
export class StepEcho {
  mismatched = false;

  constructor(
    private readonly client: Cairn,
    private readonly streams: CliStreams,
    private readonly output: Output,
  ) {}

  /**
   * `receipt`'s step output, read from `attempt` (ADR 0035): the attempt the step ran in, which a
   * run retried after a lost worker, followed from its start, has since left behind.
   */
  async step(runId: string, receipt: Receipt, attempt = 1): Promise<void> {
    const index = receipt.step_index;
    if (typeof index !== 'number') return;
    for (const stream of ['stdout', 'stderr'] as const satisfies readonly OutputStream[]) {
      const expected = receipt[`${stream}_sha256`];
      try {
        const read = await this.client.runs.output(runId, index, stream, { maxBytes: ECHO_MAX_BYTES, attempt, ...(typeof expected === 'string' ? { expectedSha256: expected } : {}) });
        if (read.bytes.byteLength > 0) await writeAll(stream === 'stdout' ? this.streams.stdout : this.streams.stderr, read.bytes);
      } catch (error) {
        if (!isCairnError(error)) throw error;
        if (error.code === 'E_INTERNAL') this.mismatched = true;
        this.output.note(`  (step ${index}'s ${stream} is not shown: ${error.code}: ${error.message})`);
      }
    }
  }
}

function writeAll(stream: NodeJS.WritableStream, bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => stream.write(bytes, (error) => (error == null ? resolve() : reject(error))));
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

export function parseIdempotencyKey(value: string): string {
  if (!IDEMPOTENCY_KEY.test(value)) throw usageError('--idempotency-key takes 1 to 200 printable ASCII characters without spaces');
  return value;
}

export interface FollowedRun {
  view: RunView;
  headHash: string;
  count: number;
}

/**
 * Follows a run's receipts over SSE until `run.sealed`, showing progress, folding its state as
 * the projector does, and verifying the chain from genesis as it arrives.
 */
export async function followRun(client: Cairn, runId: string, output: Output, timeoutMs: number | null, echo: StepEcho | null = null): Promise<FollowedRun> {
  const verifier = new ChainVerifier({ chainId: runId, requireNonEmpty: true });
  let view: RunView | null = null;
  // The attempt the receipts now arriving belong to: each `run.retried` ends one (ADR 0035).
  let attempt = 1;
  const signal = timeoutMs === null ? undefined : AbortSignal.timeout(timeoutMs);
  for await (const receipt of client.runs.follow(runId, signal === undefined ? {} : { signal })) {
    verifier.push(receipt);
    const before = view?.state;
    view = foldReceipt(view, receipt);
    if (receipt.type === 'run.retried') attempt += 1;
    if (echo !== null && receipt.type === 'step.completed') await echo.step(runId, receipt, attempt);
    const line = receiptProgressLine(receipt);
    if (line !== null) output.note(`  ${line}`);
    if (before !== undefined && view.state !== before && receipt.type !== 'run.sealed') output.note(`  state       ${view.state}`);
    // A failed grade is not final: the run waits, unsealed, for `cairn regrade` (docs/adr/0030).
    if (receipt.type === 'grade.failed') {
      const cause = typeof receipt.cause === 'string' ? ` (${receipt.cause})` : '';
      throw new CairnError('E_UNAVAILABLE', `the grade of ${runId} failed${cause}; it waits unsealed: once the judge is fixed, npx --no-install cairn regrade ${runId}`, { runId, cause: receipt.cause ?? null });
    }
  }
  if (view === null || !view.sealed) {
    if (signal?.aborted === true) {
      throw new CairnError('E_UNAVAILABLE', `stopped waiting for ${runId} after ${Math.round((timeoutMs ?? 0) / 1000)} s; it goes on: npx --no-install cairn status ${runId}`, { runId });
    }
    throw new CairnError('E_INTERNAL', `the event stream of ${runId} ended before run.sealed`, { runId });
  }
  const verification = verifier.result();
  if (!verification.ok) throw chainBrokenError(verification);
  return { view, headHash: verification.headHash, count: verification.count };
}
