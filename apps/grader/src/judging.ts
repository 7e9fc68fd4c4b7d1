import { randomBytes } from 'node:crypto';
import { DEFAULT_JUDGE_SCALE } from '@cairn/contracts';
import type { EvidenceReceipt, EvidenceReceiptOf, JudgeFailureCause } from '@cairn/contracts';
import { buildJudgePrompt, drawFence, gradingAttempt, judgementOf, judgementsOfAttempt, resolveSource } from '@cairn/judgement';
import type { JudgementContext, JudgementOutcome, RubricJudge } from '@cairn/judgement';
import { readRunChain } from '@cairn/lifecycle';
import { endRunSecretSeen, scanFields } from '@cairn/service-kit';
import type { ChainSnapshot, JsonLogger, ReactionContext, RunScanners } from '@cairn/service-kit';
import type { GraderConfig } from './grader.config.js';
import { judgeRequestBody, sha256Text } from './judge-client.js';
import type { JudgeClient } from './judge-client.js';

type OutputScanner = Awaited<ReturnType<RunScanners['forRun']>>;

/** What judging a run's criteria came to: every judgement scored (grade next), or the reaction is over (a failure recorded, or the run stopped). */
export type JudgingResult = { kind: 'judged'; judgements: Map<string, JudgementOutcome>; snapshot: ChainSnapshot } | { kind: 'stopped' };

/** How often a judgement in flight tells JetStream the grader is still at it (below any ack wait). */
const WORKING_EVERY_MS = 2_000;

/**
 * Judges a run's `judge` criteria in the chain's current attempt (docs/adr/0030), one at a time in
 * rubric order: each one answered already is read from the chain (never asked again), one asked and
 * not answered (a grader that stopped between them) is asked again with the prompt recorded; a
 * new one gets `judge.requested`, the call, and `judge.answered`. The first failure is recorded as
 * `grade.failed` with its cause, and the reaction ends there (the run waits for `cairn regrade`).
 */
export async function judgeRun(
  ctx: ReactionContext,
  start: ChainSnapshot,
  receipts: readonly EvidenceReceipt[],
  criteria: readonly RubricJudge[],
  judgementCtx: JudgementContext,
  deps: { judge: JudgeClient | null; config: GraderConfig; scanner: OutputScanner; logger: JsonLogger },
): Promise<JudgingResult> {
  const attempt = gradingAttempt(receipts);
  let snapshot = start;
  let chainNow: readonly EvidenceReceipt[] = receipts;
  const judgements = new Map<string, JudgementOutcome>();
  const append = async (type: 'judge.requested' | 'judge.answered' | 'grade.failed', fields: Record<string, unknown>, key: string) => {
    const appended = await ctx.appendAt(snapshot.headSeq, type, fields, key);
    if (appended.duplicate) {
      snapshot = await ctx.snapshot();
    } else {
      snapshot = { receipts: [...snapshot.receipts, appended.receipt], headSeq: appended.receipt.seq };
    }
    chainNow = readRunChain(snapshot.receipts)?.receipts ?? chainNow;
    return appended.receipt as EvidenceReceipt;
  };
  const fail = async (criterion: RubricJudge, cause: JudgeFailureCause, reason: string): Promise<JudgingResult> => {
    await append(
      'grade.failed',
      { reason: `judge ${criterion.id}: ${reason}`.slice(0, 2048), retryable: true, unscored: criteria.map((c) => c.id), cause, criterion_id: criterion.id, attempt },
      `judge-${criterion.id}`,
    );
    deps.logger.write('warn', 'judge failed: grade not recorded', { run_id: ctx.chainId, criterion: criterion.id, cause, attempt });
    return { kind: 'stopped' };
  };

  for (const criterion of criteria) {
    const seen = judgementsOfAttempt(chainNow, attempt).get(criterion.id);
    if (seen?.state === 'failed') return { kind: 'stopped' };
    if (seen?.state === 'done') {
      if (seen.outcome.kind === 'failed') return fail(criterion, seen.outcome.cause, seen.outcome.reason);
      judgements.set(criterion.id, seen.outcome);
      continue;
    }
    if (deps.judge === null) return fail(criterion, 'unconfigured', 'no judge is configured (CAIRN_JUDGE_URL, CAIRN_JUDGE_MODEL at the grader)');

    let requested: EvidenceReceiptOf<'judge.requested'>;
    if (seen?.state === 'asked') {
      requested = seen.requested;
    } else {
      const resolved = resolveSource(judgementCtx, criterion.source);
      // Nothing to judge (a step that did not run, a file not collected): unscored, as an unresolved check is.
      if (!resolved.found) continue;
      const bytes = typeof resolved.value === 'string' ? new TextEncoder().encode(resolved.value) : resolved.value instanceof Uint8Array ? resolved.value : null;
      if (bytes === null) continue;
      if (bytes.byteLength > deps.config.CAIRN_JUDGE_MAX_INPUT_BYTES) {
        return fail(criterion, 'budget_exceeded', `${criterion.source} is ${bytes.byteLength} bytes, over CAIRN_JUDGE_MAX_INPUT_BYTES (${deps.config.CAIRN_JUDGE_MAX_INPUT_BYTES}); it is never cut`);
      }
      const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes).replaceAll('\u0000', '\\u0000').toWellFormed();
      const scale = criterion.scale ?? DEFAULT_JUDGE_SCALE;
      const fence = drawFence(text, () => randomBytes(16).toString('hex'));
      const prompt = buildJudgePrompt({ criterion: criterion.criterion, scale, source: criterion.source, text, fence });
      // Scanned as any text derived from the run: a secret in it stops the run (E_SECRET_SEEN), the prompt never sent.
      const scanned = scanFields(deps.scanner, { system_prompt: prompt.system, user_prompt: prompt.user });
      if (scanned.findings.length > 0) {
        await endRunSecretSeen(ctx, snapshot.headSeq, 'judge.requested', scanned.findings);
        return { kind: 'stopped' };
      }
      const body = judgeRequestBody({ model: deps.judge.model, system: scanned.fields.system_prompt, user: scanned.fields.user_prompt, maxTokens: deps.config.CAIRN_JUDGE_MAX_TOKENS });
      requested = (await append(
        'judge.requested',
        {
          criterion_id: criterion.id,
          attempt,
          model: deps.judge.model,
          system_prompt: scanned.fields.system_prompt,
          user_prompt: scanned.fields.user_prompt,
          fence,
          request_sha256: sha256Text(body),
          source: criterion.source,
          input_bytes: bytes.byteLength,
          scale,
          max_tokens: deps.config.CAIRN_JUDGE_MAX_TOKENS,
          timeout_ms: deps.config.CAIRN_JUDGE_TIMEOUT_MS,
        },
        criterion.id,
      )) as EvidenceReceiptOf<'judge.requested'>;
    }

    // Exactly what the receipt records is what is sent.
    const body = judgeRequestBody({ model: requested.model, system: requested.system_prompt, user: requested.user_prompt, maxTokens: requested.max_tokens });
    const working = setInterval(() => ctx.working(), WORKING_EVERY_MS);
    let result;
    try {
      result = await deps.judge.complete(body, requested.timeout_ms);
    } finally {
      clearInterval(working);
    }
    if (result.kind === 'failed') return fail(criterion, result.cause, result.reason);

    const scanned = scanFields(deps.scanner, { response: result.content });
    if (scanned.findings.length > 0) {
      await endRunSecretSeen(ctx, snapshot.headSeq, 'judge.answered', scanned.findings);
      return { kind: 'stopped' };
    }
    const answered = (await append(
      'judge.answered',
      {
        criterion_id: criterion.id,
        attempt,
        response: scanned.fields.response,
        response_sha256: sha256Text(scanned.fields.response),
        usage: result.usage,
        latency_ms: result.latencyMs,
        finish_reason: result.finishReason,
      },
      criterion.id,
    )) as EvidenceReceiptOf<'judge.answered'>;
    // The score comes from the answer as recorded, by the function an offline check uses too.
    const outcome = judgementOf(requested, answered);
    deps.logger.write('info', 'judged', { run_id: ctx.chainId, criterion: criterion.id, attempt, outcome: outcome.kind, latency_ms: result.latencyMs });
    if (outcome.kind === 'failed') return fail(criterion, outcome.cause, outcome.reason);
    judgements.set(criterion.id, outcome);
  }
  return { kind: 'judged', judgements, snapshot };
}
