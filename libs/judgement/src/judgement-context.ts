import type { Facts } from '@cairn/kernel';

/** A step's output as stored (already redacted): bytes, or text when the caller decoded it. */
export interface StepOutput {
  /** Position of the step in the RunSpec, from 0. */
  index: number;
  stdout: Uint8Array | string;
  stderr: Uint8Array | string;
}

/**
 * What checks are judged against: the kernel's facts (the `facts` of the run's `kernel.facts`
 * receipt), the steps' output and the collected files' contents. Checks only read it.
 */
export interface JudgementContext {
  facts: Facts | Readonly<Record<string, unknown>>;
  steps: readonly StepOutput[];
  /** Collected file path → its bytes. */
  artifacts: ReadonlyMap<string, Uint8Array | string>;
}

/** Receipts carry free text up to 1024 characters, without NUL, and canonical JSON needs well-formed strings. */
export const DETAIL_MAX = 1024;

export function boundDetail(text: string): string {
  return text.replaceAll('\u0000', '\\u0000').slice(0, DETAIL_MAX).toWellFormed();
}
