import { describe, expect, it } from 'vitest';
import { matchApprovalRules } from './approval-rules.js';

const facts = { image: 'cairn/sandbox-busybox:1', egress: [] as string[], applySteps: [] as number[] };

describe('matchApprovalRules', () => {
  it('given no rules, when matched, then nothing is required', () => {
    expect(matchApprovalRules([], { ...facts, egress: ['a.example:443'], applySteps: [0] })).toEqual([]);
  });

  it('given an egress rule, when the run asks for egress, then a run-scope approval is required', () => {
    expect(matchApprovalRules([{ when: 'egress' }], { ...facts, egress: ['a.example:443'] })).toEqual([
      { approval_id: 'egress', scope: 'run', step_index: null, trigger: 'egress', reason: 'egress to a.example:443 needs approval', timeout_seconds: 86_400, granted: false },
    ]);
  });

  it('given an egress rule, when the run has no network, then nothing is required', () => {
    expect(matchApprovalRules([{ when: 'egress' }], facts)).toEqual([]);
  });

  it('given an apply_step rule, when steps 3 and 1 are marked apply, then each step needs its own approval, in step order after run scope', () => {
    const required = matchApprovalRules(
      [{ when: 'apply_step' }, { when: 'egress' }],
      { ...facts, egress: ['a.example:443'], applySteps: [3, 1] },
    );
    expect(required.map((r) => [r.approval_id, r.scope, r.step_index])).toEqual([
      ['egress', 'run', null],
      ['step-1', 'step', 1],
      ['step-3', 'step', 3],
    ]);
  });

  it('given an image rule, when the image matches by name, then it is required; another image or tag is not', () => {
    const rule = [{ when: { image: 'cairn/sandbox-busybox:1' } }];
    expect(matchApprovalRules(rule, facts).map((r) => r.approval_id)).toEqual(['image']);
    expect(matchApprovalRules(rule, { ...facts, image: 'cairn/sandbox-busybox:2' })).toEqual([]);
  });

  it('given two rules requiring the same approval, when matched, then it is required once with the shorter timeout', () => {
    const required = matchApprovalRules([{ when: 'apply_step', timeoutSeconds: 7200 }, { when: 'apply_step', timeoutSeconds: 600 }], { ...facts, applySteps: [0] });
    expect(required).toHaveLength(1);
    expect(required[0]?.timeout_seconds).toBe(600);
  });

  it('given a grant for one approval, when matched, then only that one is marked granted', () => {
    const required = matchApprovalRules([{ when: 'apply_step' }], { ...facts, applySteps: [0, 1] }, ['step-1']);
    expect(required.map((r) => [r.approval_id, r.granted])).toEqual([
      ['step-0', false],
      ['step-1', true],
    ]);
  });
});
