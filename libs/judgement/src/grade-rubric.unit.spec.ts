import { CriterionScoreSchema, GradeRecordedSchema } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import type { RubricCheck } from './grade-rubric.js';
import { gradeRecordedFields, gradeRubric } from './grade-rubric.js';
import { fixtureContext } from './judgement.fixture.js';

const ctx = fixtureContext();

const installs: RubricCheck = { id: 'installs', source: 'steps[0].exit_code', op: 'eq', value: 0, weight: 1 };
const testsPass: RubricCheck = { id: 'tests-pass', source: 'facts.junit.failed', op: 'eq', value: 0, weight: 5 };
const coverage: RubricCheck = { id: 'coverage', source: 'artifacts["/out/summary.json"].json.coverage.lines', op: 'gte', value: 80, weight: 2 };
const lcov: RubricCheck = { id: 'lcov', source: 'artifacts["/out/lcov.info"]', op: 'contains', value: 'SF:', weight: 3 };
const bench: RubricCheck = { id: 'bench', source: 'steps[2].stdout', op: 'matches', value: '\\d+ ops/s', weight: 0.5 };

describe('gradeRubric', () => {
  it('Given holding and contradicted checks, when graded, then holding ones earn their weight', () => {
    const grade = gradeRubric([installs, testsPass, coverage], ctx);
    expect(grade).toMatchObject({ score: 3, maxScore: 8, upperBound: 3 });
    expect(grade.criteria.map((c) => [c.id, c.outcome, c.earned, c.scored])).toEqual([
      ['installs', 'holds', 1, true],
      ['tests-pass', 'contradicted', 0, true],
      ['coverage', 'holds', 2, true],
    ]);
  });

  it('Given criteria that cannot be scored, when graded, then they earn zero and raise the upper bound', () => {
    const grade = gradeRubric([installs, testsPass, lcov, bench], ctx);
    expect(grade).toMatchObject({ score: 1, maxScore: 9.5, upperBound: 4.5 });
    expect(grade.criteria.find((c) => c.id === 'lcov')).toMatchObject({ outcome: 'unresolved', scored: false, earned: 0, weight: 3 });
    expect(grade.criteria.find((c) => c.id === 'bench')).toMatchObject({ outcome: 'unresolved', scored: false, earned: 0, weight: 0.5 });
  });

  it('Given an empty rubric, when graded, then everything is zero', () => {
    expect(gradeRubric([], ctx)).toEqual({ score: 0, maxScore: 0, upperBound: 0, criteria: [] });
  });

  it('Given decimal weights, when graded, then sums are exact in millionths and do not depend on order', () => {
    const checks: RubricCheck[] = [0.1, 0.2, 0.7, 1e-7, 0.3333333].map((weight, k) => ({ ...installs, id: `w${k}`, weight }));
    const grade = gradeRubric(checks, ctx);
    // 0.1 + 0.2 + 0.7 + 0 (1e-7 rounds to 0) + 0.333333
    expect(grade).toMatchObject({ score: 1.333333, maxScore: 1.333333, upperBound: 1.333333 });
    expect(grade.criteria.map((c) => c.weight)).toEqual([0.1, 0.2, 0.7, 0, 0.333333]);
    expect(gradeRubric([...checks].reverse(), ctx).score).toBe(grade.score);
  });

  it('Given a weight that is not a number in range, when graded, then it counts zero and says so', () => {
    const grade = gradeRubric(
      [
        { ...installs, id: 'nan', weight: Number.NaN },
        { ...installs, id: 'negative', weight: -2 },
        { ...installs, id: 'huge', weight: 1e300 },
        { ...installs, id: 'fine', weight: 2 },
      ],
      ctx,
    );
    expect(grade).toMatchObject({ score: 2, maxScore: 2, upperBound: 2 });
    expect(grade.criteria[0]).toMatchObject({ weight: 0, earned: 0, detail: expect.stringMatching(/^weight NaN is not a number/) as unknown });
  });

  it('always keeps score ≤ upper bound ≤ max score, and fits grade.recorded', () => {
    const all = [installs, testsPass, coverage, lcov, bench];
    for (let mask = 0; mask < 1 << all.length; mask++) {
      const grade = gradeRubric(
        all.filter((_, k) => mask & (1 << k)),
        ctx,
      );
      expect(grade.score).toBeLessThanOrEqual(grade.upperBound);
      expect(grade.upperBound).toBeLessThanOrEqual(grade.maxScore);
      const fields = gradeRecordedFields(grade);
      for (const criterion of fields.criteria) expect(CriterionScoreSchema.parse(criterion)).toEqual(criterion);
      const body = {
        v: 1,
        seq: 9,
        run_id: 'run_abc',
        tenant: 'acme',
        type: 'grade.recorded',
        actor: 'grader',
        ts: '2026-11-30T00:00:00.000Z',
        causation: 'run_abc:8',
        ...fields,
      };
      expect(GradeRecordedSchema.safeParse(body).success).toBe(true);
    }
  });
});

describe('gradeRubric: rewards (a Harbor task writes its reward into a file)', () => {
  const TXT = 'artifacts["/out/harbor-logs/verifier/reward.txt"]';
  const JSON_REWARD = 'artifacts["/out/harbor-logs/verifier/reward.json"].json.reward';
  const withFiles = (files: Record<string, string>) => ({ ...ctx, artifacts: new Map(Object.entries(files).map(([path, text]) => [path, new TextEncoder().encode(text)])) });
  const reward = { id: 'reward', kind: 'reward' as const, sources: [TXT, JSON_REWARD], weight: 1 };

  it('Given reward.txt holding 1, 0 or a fraction, when graded, then it earns that fraction of the weight', () => {
    for (const [text, earned, outcome] of [['1\n', 1, 'holds'], ['0', 0, 'contradicted'], [' 0.25 ', 0.25, 'contradicted']] as const) {
      const grade = gradeRubric([reward], withFiles({ '/out/harbor-logs/verifier/reward.txt': text }));
      expect(grade).toMatchObject({ score: earned, maxScore: 1, upperBound: earned });
      expect(grade.criteria[0]).toMatchObject({ kind: 'reward', earned, scored: true, outcome });
      expect(GradeRecordedSchema.safeParse({ v: 1, seq: 9, run_id: 'run_x', tenant: 'default', type: 'grade.recorded', actor: 'grader', ts: '2026-12-01T00:00:00.000Z', causation: 'run_x:8', ...gradeRecordedFields(grade) }).success).toBe(true);
    }
  });

  it('Given no reward.txt but a reward.json, when graded, then the next source gives the reward', () => {
    const grade = gradeRubric([{ ...reward, weight: 4 }], withFiles({ '/out/harbor-logs/verifier/reward.json': '{"reward": 0.5, "passed": 3}' }));
    expect(grade).toMatchObject({ score: 2, maxScore: 4 });
  });

  it('Given no reward at all, or one that is not a number in [0, 1], when graded, then it is unscored (never a silent zero)', () => {
    for (const files of [{} as Record<string, string>, { '/out/harbor-logs/verifier/reward.txt': 'passed' }, { '/out/harbor-logs/verifier/reward.txt': '2' }, { '/out/harbor-logs/verifier/reward.txt': '-0.5' }]) {
      const grade = gradeRubric([reward], withFiles(files));
      expect(grade).toMatchObject({ score: 0, maxScore: 1, upperBound: 1 });
      expect(grade.criteria[0]).toMatchObject({ scored: false, outcome: 'unresolved' });
    }
  });
});
