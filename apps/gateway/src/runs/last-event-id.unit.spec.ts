import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { resumeAfter } from './last-event-id.js';

function codeOf(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (error) {
    return isCairnError(error) ? error.code : 'not a CairnError';
  }
}

describe('event stream resume', () => {
  const RUN = 'run_abc';
  it('resumes after Last-Event-ID, which wins over ?after', () => {
    expect(resumeAfter(RUN, `${RUN}:7`, 3)).toBe(7);
    expect(resumeAfter(RUN, `${RUN}:0`, undefined)).toBe(0);
  });

  it('falls back to ?after, then to the start', () => {
    expect(resumeAfter(RUN, undefined, 3)).toBe(3);
    expect(resumeAfter(RUN, '', 3)).toBe(3);
    expect(resumeAfter(RUN, undefined, undefined)).toBe(0);
  });

  it('refuses an id of another run or of no form', () => {
    expect(codeOf(() => resumeAfter(RUN, 'run_other:7', undefined))).toBe('E_INPUT');
    expect(codeOf(() => resumeAfter(RUN, '7', undefined))).toBe('E_INPUT');
    expect(codeOf(() => resumeAfter(RUN, `${RUN}:-1`, undefined))).toBe('E_INPUT');
    expect(codeOf(() => resumeAfter(RUN, `${RUN}:07`, undefined))).toBe('E_INPUT');
  });

  it("resumes a sandbox's stream by its own chain id, and refuses a run's id there", () => {
    expect(resumeAfter('sbx_abc', 'sbx_abc:4', undefined)).toBe(4);
    expect(codeOf(() => resumeAfter('sbx_abc', 'run_abc:4', undefined))).toBe('E_INPUT');
    expect(codeOf(() => resumeAfter('run_abc', 'sbx_abc:4', undefined))).toBe('E_INPUT');
  });
});
