import { SandboxPathSchema } from '@cairn/contracts';
import type { SandboxFileOut } from '@cairn/sandbox';

/*
 * The names of collected output files are the workload's to choose, and they become keys of the
 * run's `artifact_hashes`. A name a receipt cannot record as it is — a control character (a
 * newline, an escape), longer than a path on the chain may be, or bytes that are not UTF-8 (read
 * as U+FFFD, so the name is no longer the file's, and two such files would share one) — is not
 * collected, and `run.executed` says how many were skipped. Escaping them instead could make two
 * files one, or one file look like another: the evidence would name what is not there.
 */

/** Why a collected name cannot go on the chain, or null when it can. */
export function unrecordableName(path: string): 'control_character' | 'not_utf8' | 'too_long' | 'not_a_path' | null {
  if (SandboxPathSchema.safeParse(path).success) return path.includes('\uFFFD') ? 'not_utf8' : null;
  if (!path.startsWith('/')) return 'not_a_path';
  if (/\p{Cc}/u.test(path)) return 'control_character';
  return 'too_long';
}

/** The files whose names can be recorded, in order, and how many were skipped for each reason. */
export function recordableOutputs(files: readonly SandboxFileOut[]): { files: SandboxFileOut[]; skipped: Partial<Record<NonNullable<ReturnType<typeof unrecordableName>>, number>> } {
  const kept: SandboxFileOut[] = [];
  const skipped: Partial<Record<NonNullable<ReturnType<typeof unrecordableName>>, number>> = {};
  for (const file of files) {
    const why = unrecordableName(file.path);
    if (why === null) kept.push(file);
    else skipped[why] = (skipped[why] ?? 0) + 1;
  }
  return { files: kept, skipped };
}
