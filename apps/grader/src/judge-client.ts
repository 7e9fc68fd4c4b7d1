import { createHash } from 'node:crypto';
import { stat, readFile } from 'node:fs/promises';
import { CairnError } from '@cairn/contracts';
import type { JudgeFailureCause } from '@cairn/contracts';
import type { GraderConfig } from './grader.config.js';

/** The most bytes of a server's answer read; a larger one is a judge failure (`invalid_reply`). */
const MAX_ANSWER_BYTES = 1 << 20;
/** The most characters of a reply's message recorded (`judge.answered.response`); a longer one fails (`invalid_reply`). */
export const MAX_REPLY_CHARS = 16_384;

export interface JudgeRequest {
  model: string;
  system: string;
  user: string;
  maxTokens: number;
}

export type JudgeCallResult =
  | {
      kind: 'answered';
      content: string;
      usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
      finishReason: string | null;
      latencyMs: number;
    }
  | { kind: 'failed'; cause: JudgeFailureCause; reason: string; latencyMs: number };

/** The request body as sent, as exact bytes: its sha256 is `judge.requested.request_sha256`. */
export function judgeRequestBody(request: JudgeRequest): string {
  return JSON.stringify({
    model: request.model,
    messages: [
      { role: 'system', content: request.system },
      { role: 'user', content: request.user },
    ],
    max_tokens: request.maxTokens,
    temperature: 0,
    stream: false,
    response_format: { type: 'json_object' },
  });
}

export function sha256Text(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The Nest token of the grader's `JudgeClient | null`. */
export const JUDGE_CLIENT = Symbol('JUDGE_CLIENT');

/** The port the grader reaches its judge through: an OpenAI-compatible chat API. */
export interface JudgeClient {
  readonly model: string;
  complete(body: string, timeoutMs: number): Promise<JudgeCallResult>;
}

/**
 * `POST <CAIRN_JUDGE_URL>/chat/completions`, the de-facto interface of vLLM, llama.cpp's server,
 * Ollama and hosted models. The only host the grader calls: no redirect is followed, the key rides
 * the Authorization header only, and the answer is read bounded.
 */
export class OpenAiJudgeClient implements JudgeClient {
  private readonly endpoint: string;

  constructor(
    url: string,
    readonly model: string,
    private readonly apiKey: string | null,
  ) {
    this.endpoint = `${url.replace(/\/+$/, '')}/chat/completions`;
  }

  async complete(body: string, timeoutMs: number): Promise<JudgeCallResult> {
    const started = performance.now();
    const elapsed = () => Math.max(0, Math.round(performance.now() - started));
    const signal = AbortSignal.timeout(timeoutMs);
    let text: string;
    let status: number;
    try {
      const response = await fetch(this.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', ...(this.apiKey === null ? {} : { authorization: `Bearer ${this.apiKey}` }) },
        body,
        redirect: 'error',
        signal,
      });
      status = response.status;
      text = await readBounded(response, MAX_ANSWER_BYTES);
    } catch (error) {
      if (signal.aborted) return { kind: 'failed', cause: 'timeout', reason: `the judge did not answer within ${timeoutMs} ms`, latencyMs: elapsed() };
      if (error instanceof AnswerTooLarge) return { kind: 'failed', cause: 'invalid_reply', reason: `the judge's answer is over ${MAX_ANSWER_BYTES} bytes`, latencyMs: elapsed() };
      // The cause's message names the host and the errno, never the key (it is only in a header).
      const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : '';
      return { kind: 'failed', cause: 'http_error', reason: `the judge could not be reached${cause}`.slice(0, 512), latencyMs: elapsed() };
    }
    if (status < 200 || status > 299) return { kind: 'failed', cause: 'http_error', reason: `the judge answered HTTP ${status}`, latencyMs: elapsed() };
    return { ...readCompletion(text), latencyMs: elapsed() };
  }
}

class AnswerTooLarge extends Error {}

async function readBounded(response: Response, max: number): Promise<string> {
  if (response.body === null) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > max) throw new AnswerTooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A chat completion's first choice: its message text, the usage and the finish reason — or why it is not one. */
export function readCompletion(
  text: string,
): { kind: 'answered'; content: string; usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null; finishReason: string | null } | { kind: 'failed'; cause: 'invalid_reply'; reason: string } {
  const invalid = (reason: string) => ({ kind: 'failed' as const, cause: 'invalid_reply' as const, reason });
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return invalid('the judge answered something that is not JSON');
  }
  const body = parsed as { choices?: unknown; usage?: unknown };
  const choice = Array.isArray(body.choices) ? (body.choices[0] as { message?: { content?: unknown }; finish_reason?: unknown } | undefined) : undefined;
  const content = choice?.message?.content;
  if (typeof content !== 'string') return invalid('the judge answered no choices[0].message.content');
  if (content.length > MAX_REPLY_CHARS || content.includes('\u0000')) return invalid(`the judge's reply is over ${MAX_REPLY_CHARS} characters or holds a NUL`);
  const u = body.usage as { prompt_tokens?: unknown; completion_tokens?: unknown; total_tokens?: unknown } | undefined | null;
  const count = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null);
  const promptTokens = count(u?.prompt_tokens);
  const completionTokens = count(u?.completion_tokens);
  const usage =
    promptTokens === null || completionTokens === null
      ? null
      : { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: count(u?.total_tokens) ?? promptTokens + completionTokens };
  const finish = typeof choice?.finish_reason === 'string' ? choice.finish_reason.slice(0, 64) : null;
  return { kind: 'answered', content: content.toWellFormed(), usage, finishReason: finish };
}

/**
 * The judge the configuration names, or null when none is: the key read once from its file, which
 * must be a regular file no one else may read (like the seal key) and hold one line.
 */
export async function judgeClientOf(config: GraderConfig): Promise<JudgeClient | null> {
  if (config.CAIRN_JUDGE_URL === undefined || config.CAIRN_JUDGE_MODEL === undefined) return null;
  let key: string | null = null;
  const file = config.CAIRN_JUDGE_API_KEY_FILE;
  if (file !== undefined) {
    const info = await stat(file).catch(() => null);
    if (info === null || !info.isFile()) throw new CairnError('E_INPUT', `CAIRN_JUDGE_API_KEY_FILE ${file} is not a readable file`);
    if ((info.mode & 0o077) !== 0) throw new CairnError('E_INPUT', `CAIRN_JUDGE_API_KEY_FILE ${file} may be read by others (mode ${(info.mode & 0o777).toString(8)}): chmod 600 it`);
    key = (await readFile(file, 'utf8')).trim();
    if (key === '' || /\s/.test(key) || [...key].some((c) => c.charCodeAt(0) < 0x20)) throw new CairnError('E_INPUT', `CAIRN_JUDGE_API_KEY_FILE ${file} does not hold one key on one line`);
  }
  return new OpenAiJudgeClient(config.CAIRN_JUDGE_URL, config.CAIRN_JUDGE_MODEL, key);
}
