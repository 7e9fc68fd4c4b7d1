import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '@cairn/config';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GraderConfigSchema } from './grader.config.js';
import { judgeClientOf, judgeRequestBody, readCompletion } from './judge-client.js';

let dir: string;
const BASE = { CAIRN_NATS_URL: 'nats://127.0.0.1:4222' };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-judge-config-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('the judge configuration, validated at boot', () => {
  it('takes no judge, or a URL with its model', () => {
    expect(loadConfig(GraderConfigSchema, BASE).CAIRN_JUDGE_URL).toBeUndefined();
    const config = loadConfig(GraderConfigSchema, { ...BASE, CAIRN_JUDGE_URL: 'http://127.0.0.1:8000/v1', CAIRN_JUDGE_MODEL: 'llama' });
    expect(config).toMatchObject({ CAIRN_JUDGE_TIMEOUT_MS: 60_000, CAIRN_JUDGE_MAX_TOKENS: 512, CAIRN_JUDGE_MAX_INPUT_BYTES: 16_384 });
  });

  it.each([
    ['a URL without a model', { CAIRN_JUDGE_URL: 'http://127.0.0.1:8000/v1' }, /CAIRN_JUDGE_MODEL/],
    ['a model without a URL', { CAIRN_JUDGE_MODEL: 'llama' }, /CAIRN_JUDGE_URL/],
    ['credentials in the URL', { CAIRN_JUDGE_URL: 'https://user:pw@judge.example/v1', CAIRN_JUDGE_MODEL: 'm' }, /CAIRN_JUDGE_URL/],
    ['a URL that is not http(s)', { CAIRN_JUDGE_URL: 'file:///etc/passwd', CAIRN_JUDGE_MODEL: 'm' }, /CAIRN_JUDGE_URL/],
    ['the key in the environment', { CAIRN_JUDGE_URL: 'http://127.0.0.1:8000/v1', CAIRN_JUDGE_MODEL: 'm', CAIRN_JUDGE_API_KEY: 'sk-live-1234' }, /CAIRN_JUDGE_API_KEY/],
    ['an input bound over 64 KiB', { CAIRN_JUDGE_MAX_INPUT_BYTES: '65537' }, /CAIRN_JUDGE_MAX_INPUT_BYTES/],
  ])('refuses %s (E_INPUT naming the variable, never its value)', (_what, env, variable) => {
    let error: unknown;
    try {
      loadConfig(GraderConfigSchema, { ...BASE, ...env });
    } catch (caught) {
      error = caught;
    }
    expect(error).toMatchObject({ code: 'E_INPUT', message: expect.stringMatching(variable) as string });
    expect(String((error as Error).message)).not.toContain('sk-live-1234');
    expect(String((error as Error).message)).not.toContain(':pw@');
  });

  it('reads the key from a 0600 file, and refuses one others may read or that holds more than one line', async () => {
    const url = 'http://127.0.0.1:8000/v1';
    const good = join(dir, 'good.key');
    await writeFile(good, 'sk-abc123\n', { mode: 0o600 });
    expect(await judgeClientOf(loadConfig(GraderConfigSchema, { ...BASE, CAIRN_JUDGE_URL: url, CAIRN_JUDGE_MODEL: 'm', CAIRN_JUDGE_API_KEY_FILE: good }))).toMatchObject({ model: 'm' });
    const open = join(dir, 'open.key');
    await writeFile(open, 'sk-abc123\n');
    await chmod(open, 0o644);
    await expect(judgeClientOf(loadConfig(GraderConfigSchema, { ...BASE, CAIRN_JUDGE_URL: url, CAIRN_JUDGE_MODEL: 'm', CAIRN_JUDGE_API_KEY_FILE: open }))).rejects.toMatchObject({ code: 'E_INPUT', message: expect.stringMatching(/chmod 600/) as string });
    const two = join(dir, 'two.key');
    await writeFile(two, 'sk-abc\nsk-def\n', { mode: 0o600 });
    await expect(judgeClientOf(loadConfig(GraderConfigSchema, { ...BASE, CAIRN_JUDGE_URL: url, CAIRN_JUDGE_MODEL: 'm', CAIRN_JUDGE_API_KEY_FILE: two }))).rejects.toMatchObject({ code: 'E_INPUT' });
    await expect(judgeClientOf(loadConfig(GraderConfigSchema, { ...BASE, CAIRN_JUDGE_URL: url, CAIRN_JUDGE_MODEL: 'm', CAIRN_JUDGE_API_KEY_FILE: join(dir, 'absent') }))).rejects.toMatchObject({ code: 'E_INPUT' });
  });
});

describe('the chat completion as read', () => {
  it('sends the two roles, the budget, temperature 0 and a JSON answer asked for', () => {
    expect(JSON.parse(judgeRequestBody({ model: 'm', system: 's', user: 'u', maxTokens: 64 }))).toEqual({
      model: 'm',
      messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'u' }],
      max_tokens: 64,
      temperature: 0,
      stream: false,
      response_format: { type: 'json_object' },
    });
  });

  it('reads the first choice, its usage and finish reason; anything else is invalid_reply', () => {
    const ok = JSON.stringify({ choices: [{ message: { content: '{"score":1,"reason":"r"}' }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 4 } });
    expect(readCompletion(ok)).toEqual({ kind: 'answered', content: '{"score":1,"reason":"r"}', usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 }, finishReason: 'stop' });
    expect(readCompletion(JSON.stringify({ choices: [{ message: { content: 'x' } }] }))).toMatchObject({ kind: 'answered', usage: null, finishReason: null });
    for (const bad of ['not json', '{}', JSON.stringify({ choices: [] }), JSON.stringify({ choices: [{ message: { content: 7 } }] }), JSON.stringify({ choices: [{ message: { content: 'x'.repeat(16_385) } }] })]) {
      expect(readCompletion(bad), bad.slice(0, 40)).toMatchObject({ kind: 'failed', cause: 'invalid_reply' });
    }
  });
});
