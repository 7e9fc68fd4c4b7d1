import { createHash } from 'node:crypto';

/** Lower-case hex sha256 of bytes, or of a string's UTF-8 encoding. */
export function sha256Hex(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

export interface FileDigest {
  sha256: string;
  bytes: number;
}

export function fileDigest(content: Uint8Array): FileDigest {
  return { sha256: sha256Hex(content), bytes: content.byteLength };
}

/** A step's exit code as recorded; null when the process never exited on its own (killed, not started). */
export function exitCodeOf(step: { exit_code: number | null }): number | null {
  return typeof step.exit_code === 'number' && Number.isInteger(step.exit_code) ? step.exit_code : null;
}
