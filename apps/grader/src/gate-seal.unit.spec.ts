import { readRunChain } from '@cairn/lifecycle';
import { recordedRunOf, runFacts } from '@cairn/service-kit';
import type { LoadedArtifact } from '@cairn/service-kit';
import { LocalChain, passingRun, plannedRun } from '@cairn/service-kit/testing';
import { describe, expect, it } from 'vitest';
import { decideSeal, shouldGrade } from './run-seal.js';

/* A verification that failed the regression gate (docs/adr/0004) is sealed ROLLBACK E_GATE_FAIL, never graded. */

const RUN = 'run_gateseal1';

function verifiedWithGate(passed: boolean) {
  const planned = plannedRun(RUN, passingRun());
  const chain = new LocalChain(RUN).addAll(planned.events);
  const loaded = new Map<string, LoadedArtifact>([...planned.blobs].map(([sha, bytes]) => [sha, { state: 'ok', bytes }]));
  const facts = runFacts(recordedRunOf(chain.receipts), loaded);
  chain.add({ type: 'kernel.facts', actor: 'kernel', causation: `${RUN}:10`, fields: { facts, operations: ['file_digest'] } });
  const gate = {
    passed,
    patch_step: 0,
    patch_exit_code: 0,
    patch: { path: '/out/junit.xml', sha256: 'a'.repeat(64), rejected: !passed },
    checks: [{ id: 'tests-pass', before: 'holds', after: passed ? 'holds' : 'contradicted', result: passed ? 'held' : 'regressed' }],
  };
  const verification = chain.add({
    type: 'verification.completed',
    actor: 'verifier',
    causation: `${RUN}:11`,
    fields: {
      verdict: 'SUPPORTS',
      chain_ok: true,
      head_hash: chain.receipts.at(-1)!.hash,
      receipts_checked: 11,
      invariants: [],
      checks: [],
      gate,
      ...(passed ? {} : { error_code: 'E_GATE_FAIL' }),
    },
  });
  return { chain: readRunChain(chain.receipts)!, verification };
}

describe('sealing a gated run', () => {
  it('a failed gate: not graded, sealed at once ROLLBACK E_GATE_FAIL over the verification', () => {
    const { chain, verification } = verifiedWithGate(false);
    expect(chain.view).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_GATE_FAIL' });
    expect(shouldGrade(chain, verification)).toBe(false);
    expect(decideSeal(chain, verification, Date.parse(verification.ts), 10_000)).toEqual({
      kind: 'seal',
      fields: { final_state: 'ROLLBACK', evidence_digest: verification.hash, error_code: 'E_GATE_FAIL' },
    });
  });

  it('a passed gate: graded, then sealed SEALED as any verified run', () => {
    const { chain, verification } = verifiedWithGate(true);
    expect(chain.view?.state).toBe('VERIFIED');
    expect(shouldGrade(chain, verification)).toBe(true);
    expect(decideSeal(chain, verification, Date.parse(verification.ts), 10_000)).toEqual({
      kind: 'seal',
      fields: { final_state: 'SEALED', evidence_digest: verification.hash },
    });
  });
});
