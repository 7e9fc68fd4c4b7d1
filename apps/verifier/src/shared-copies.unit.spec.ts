import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// The kernel computes facts and the verifier recomputes them from the same bytes: both (and the
// grader) must read runs with the same code. Apps never import each other, so these files are
// copies; this fails as soon as one drifts.
const SHARED = ['src/run-outputs.reader.ts', 'src/artifact.loader.ts', 'src/run-chain.reader.ts', 'test/executed-run.fixture.ts', 'test/evidence-world.harness.ts'];
const APPS = ['kernel', 'verifier', 'grader'];

describe('the run readers shared by the kernel, the verifier and the grader', () => {
  it.each(SHARED)('%s is the same in every app', (file) => {
    const [first, ...rest] = APPS.map((app) => readFileSync(new URL(`../../${app}/${file}`, import.meta.url), 'utf8'));
    for (const copy of rest) expect(copy).toBe(first);
  });
});
