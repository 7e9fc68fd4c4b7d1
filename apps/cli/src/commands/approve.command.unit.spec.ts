import { describe, expect, it } from 'vitest';
import { approvalBody } from './approve.command.js';

describe('cairn approve: the request body', () => {
  it('approves by default, rejects with --reject, and carries a comment and an approval id', () => {
    expect(approvalBody({})).toEqual({ decision: 'approve' });
    expect(approvalBody({ reject: true, comment: 'not today', approval: 'step-2' })).toEqual({ decision: 'reject', comment: 'not today', approvalId: 'step-2' });
  });

  it('refuses an empty, oversized or NUL comment and a malformed approval id as usage errors', () => {
    for (const comment of ['', 'x'.repeat(1025), 'a\u0000b']) {
      expect(() => approvalBody({ comment })).toThrow(expect.objectContaining({ code: 'E_INPUT' }) as Error);
    }
    expect(() => approvalBody({ approval: 'Step 2' })).toThrow(/--approval takes an approval id/);
  });
});
