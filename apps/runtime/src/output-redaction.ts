import type { Redaction } from '@cairn/contracts';
import type { ExecResult, SandboxFileOut } from '@cairn/sandbox';
import type { Finding, OutputScanner } from '@cairn/secrets';
import { boundedText } from './receipt-text.js';
import type { EventFields } from './runtime-receipts.builder.js';

/*
 * Redaction before hashing (PRODUCT.md): a step's output and the collected files are scanned for the
 * run's secrets and for key patterns before anything is stored, hashed or appended. What was found
 * is said by name and pattern only (I-7); a hit stops the run, ROLLBACK E_SECRET_SEEN.
 */

/** What a scan found in one place, as a receipt's redactions (names and counts, never text). */
export function redactionsOf(findings: readonly Finding[], stream: Redaction['stream'], path?: string): Redaction[] {
  return findings.map((finding) => {
    const redaction: Redaction = { stream, pattern: finding.pattern, count: finding.count };
    if (path !== undefined) redaction.path = path;
    if (finding.secret !== null) redaction.secret = finding.secret;
    return redaction;
  });
}

/** A step's result with its kept stdout and stderr redacted, and what was redacted. */
export function redactStepResult(scanner: OutputScanner, result: ExecResult): { result: ExecResult; redactions: Redaction[] } {
  const stdout = scanner.scan(result.stdout);
  const stderr = scanner.scan(result.stderr);
  const redactions = [...redactionsOf(stdout.findings, 'stdout'), ...redactionsOf(stderr.findings, 'stderr')];
  if (redactions.length === 0) return { result, redactions };
  return { result: { ...result, stdout: stdout.bytes, stderr: stderr.bytes }, redactions };
}

/** Collected files with each one redacted, and what was redacted (by path). */
export function redactFiles(scanner: OutputScanner, files: readonly SandboxFileOut[]): { files: SandboxFileOut[]; redactions: Redaction[] } {
  const redactions: Redaction[] = [];
  const out = files.map((file) => {
    const scanned = scanner.scan(file.content);
    if (scanned.findings.length === 0) return file;
    redactions.push(...redactionsOf(scanned.findings, 'file', file.path));
    return { ...file, content: scanned.bytes, size: scanned.bytes.length };
  });
  return { files: out, redactions };
}

/** A step receipt that says what was redacted from it, and that the scan stopped it. */
export function withRedactions(fields: EventFields<'step.completed'>, redactions: readonly Redaction[]): EventFields<'step.completed'> {
  if (redactions.length === 0) return fields;
  return { ...fields, redactions: redactions.slice(0, 256), error_code: 'E_SECRET_SEEN' };
}

/** One `secret.redacted` receipt per redaction: where, which pattern and secret name, how often — never the value. */
export function secretRedactedFields(redaction: Redaction, stepIndex?: number): EventFields<'secret.redacted'> {
  const fields: EventFields<'secret.redacted'> = { where: redaction.stream, pattern: redaction.pattern, count: redaction.count };
  if (stepIndex !== undefined) fields.step_index = stepIndex;
  if (redaction.path !== undefined) fields.path = redaction.path;
  if (redaction.secret !== undefined) fields.secret = redaction.secret;
  return fields;
}

/** `secret API_TOKEN (secret.base64 ×1) and github-token ×2 in the stdout of step 1`: names and counts only. */
export function describeRedactions(redactions: readonly Redaction[], where: string): string {
  const seen = redactions.map((r) => (r.secret === undefined ? `${r.pattern} ×${r.count}` : `secret ${r.secret} (${r.pattern} ×${r.count})`));
  const places = [...new Set(redactions.map((r) => (r.stream === 'file' ? (r.path ?? 'a file') : r.stream)))].join(', ');
  return `${[...new Set(seen)].join(', ')} in ${places} ${where}`;
}

/** The critical alert that goes on the chain (and to `alert.*` subscribers) when a secret is seen. */
export function secretAlertFields(redactions: readonly Redaction[], where: string): EventFields<'alert.raised'> {
  const message = `E_SECRET_SEEN: ${describeRedactions(redactions, where)}; redacted before hashing, and the run is stopped`;
  // Names the paths the workload chose: cut without splitting a surrogate pair (receipt-text.ts).
  return { severity: 'critical', error_code: 'E_SECRET_SEEN', message: boundedText(message, 2048) };
}
