import type { OpEnd } from '@cairn/contracts';

/** How many answers a session keeps: far more than can be redelivered within a consumer's ack wait. */
export const ANSWERED_OPS_KEPT = 1024;

/**
 * The answers a sandbox session gave, by op id, so that an op delivered again — its ack lost, or
 * its worker slow to ack — is answered as before and never performed twice (issue 18: an exec
 * redelivered ran its command a second time, unrecorded, because only its receipts were
 * de-duplicated). `begin` says whether an op is new; a repeat gets the first answer again, with no
 * chunks (none are sent again), or `null` while the first is still under way. The oldest answers
 * are forgotten past `kept`.
 */
export class AnsweredOps {
  private readonly answers = new Map<string, OpEnd | null>();

  constructor(private readonly kept: number = ANSWERED_OPS_KEPT) {
    if (!Number.isSafeInteger(kept) || kept < 1) throw new RangeError(`kept must be a positive integer, not ${kept}`);
  }

  /** `new` for an op not seen (now marked under way); else what to answer a repeat with. */
  begin(opId: string): { kind: 'new' } | { kind: 'repeat'; answer: OpEnd | null } {
    if (this.answers.has(opId)) {
      const answer = this.answers.get(opId) ?? null;
      return { kind: 'repeat', answer: answer === null || !answer.ok ? answer : { ...answer, chunks: { stdout: 0, stderr: 0, data: 0 } } };
    }
    this.answers.set(opId, null);
    while (this.answers.size > this.kept) this.answers.delete(this.answers.keys().next().value!);
    return { kind: 'new' };
  }

  /** The answer the op got (kept only while the op is remembered). */
  answered(opId: string, answer: OpEnd): void {
    if (this.answers.has(opId)) this.answers.set(opId, answer);
  }

  get size(): number {
    return this.answers.size;
  }
}
