import { sealReceipt } from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import { chainMessageProblem } from './chain-message.js';

const body = { v: 1, seq: 3, run_id: 'run_watch', tenant: 'acme', type: 'step.started', actor: 'runtime', ts: '2026-12-02T10:00:00.000Z', causation: 'run_watch:2' };
const receipt = sealReceipt('a'.repeat(64), body);

describe('chainMessageProblem (what the runtime\'s watch suspects, ADR 0033)', () => {
  it('takes a receipt whose hash recomputes from its body', () => {
    expect(chainMessageProblem(JSON.stringify(receipt))).toBeNull();
  });

  it('suspects a message that is not JSON', () => {
    expect(chainMessageProblem('{"type":"step.completed", not json')).toBe('not JSON');
  });

  it('suspects JSON that is not a receipt envelope, naming the field', () => {
    expect(chainMessageProblem(JSON.stringify({ type: 'step.completed', seq: 'three' }))).toMatch(/^not a receipt envelope \(/);
    expect(chainMessageProblem('[]')).toMatch(/^not a receipt envelope/);
  });

  it('suspects a receipt whose hash is not its own (a forgery that chains by prev_hash)', () => {
    expect(chainMessageProblem(JSON.stringify({ ...receipt, hash: 'f'.repeat(64) }))).toBe('seq 3: its hash does not recompute from its body');
    expect(chainMessageProblem(JSON.stringify({ ...receipt, actor: 'kernel' }))).toBe('seq 3: its hash does not recompute from its body');
  });
});
