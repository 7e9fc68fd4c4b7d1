import { isCairnError, ListRunsQuerySchema, RunIdSchema } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { InputValidationPipe } from './input-validation.pipe.js';

const pipe = new InputValidationPipe();

async function refusal(value: unknown, metadata: Parameters<InputValidationPipe['transform']>[1]): Promise<{ code: string; message: string }> {
  try {
    await pipe.transform(value, metadata);
  } catch (error) {
    if (isCairnError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('InputValidationPipe', () => {
  it('passes parameters without a schema untouched', async () => {
    const value = { anything: 1 };
    expect(await pipe.transform(value, { type: 'body' })).toBe(value);
  });

  it('returns the parsed value (query strings coerced)', async () => {
    expect(await pipe.transform({ limit: '5', state: 'SEALED' }, { type: 'query', schema: ListRunsQuerySchema })).toEqual({ limit: 5, state: 'SEALED' });
  });

  it('refuses with E_INPUT naming the field', async () => {
    expect(await refusal({ limit: '900' }, { type: 'query', schema: ListRunsQuerySchema })).toMatchObject({ code: 'E_INPUT', message: expect.stringMatching(/^invalid query: limit: /) as unknown });
    expect(await refusal({ state: 'DONE' }, { type: 'query', schema: ListRunsQuerySchema })).toMatchObject({ message: expect.stringContaining('state: ') as unknown });
    expect(await refusal({ colour: 'red' }, { type: 'query', schema: ListRunsQuerySchema })).toMatchObject({ message: expect.stringContaining('colour') as unknown });
    expect(await refusal('RUN_X', { type: 'param', data: 'id', schema: RunIdSchema })).toMatchObject({
      code: 'E_INPUT',
      message: expect.stringMatching(/^invalid path parameter: id: a run id is run_/) as unknown,
    });
  });
});
