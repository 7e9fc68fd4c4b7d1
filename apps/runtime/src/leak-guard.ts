import type { EventType } from '@cairn/contracts';
import { redactJson } from '@cairn/secrets';
import type { FieldFinding, OutputScanner } from '@cairn/secrets';
import type { LogFilter } from '@cairn/service-kit';
import { boundedText } from './receipt-text.js';
import type { EventFields } from './runtime-receipts.builder.js';

/*
 * Every string a workload could have chosen — a file or directory name, an egress host, an error's
 * text — is scanned before it is appended, logged or returned (issue 13). What is found is replaced
 * by its marker where it stands, and noted: the run or session that produced it then ends
 * E_SECRET_SEEN, each finding recorded by `secret.redacted` (names, fields and counts, never text).
 */

/** Where a finding was about to go. */
export type LeakPlace = 'receipt' | 'reply' | 'log';

export interface Leak extends FieldFinding {
  readonly where: LeakPlace;
  /** For `receipt`: the type it was about to be appended as. */
  readonly receiptType?: EventType;
}

/** Receipts that carry only what a scan said (names, patterns, counts): redacted, never a new finding. */
const QUIET_TYPES: ReadonlySet<EventType> = new Set<EventType>(['secret.redacted', 'alert.raised']);

/** A field name fit for `secret.redacted.field` (a token), or undefined. */
function fieldToken(field: string): string | undefined {
  return /^[a-z0-9][a-z0-9_.-]{0,63}$/.test(field) ? field : undefined;
}

export class LeakGuard {
  private readonly leaks: Leak[] = [];
  private recorded = 0;

  /** `scanner` is read at each use: a run builds its own once its secrets are read. */
  constructor(
    private readonly scanner: () => OutputScanner,
    private readonly onLeak: () => void,
  ) {}

  /** Whether anything was found so far. */
  get seen(): boolean {
    return this.leaks.length > 0;
  }

  /** A receipt's fields, redacted; what was found is noted (and `onLeak` told). */
  receipt<T extends Record<string, unknown>>(type: EventType, fields: T): T {
    const out = redactJson(this.scanner(), fields);
    if (out.findings.length > 0 && !QUIET_TYPES.has(type)) this.note(out.findings.map((f) => ({ ...f, where: 'receipt' as const, receiptType: type })));
    return out.value;
  }

  /** A text about to leave the worker under `field` (an error's message in a reply, an outcome's message), redacted. */
  text(where: LeakPlace, field: string, text: string): string {
    const out = this.scanner().scanText(text);
    if (out.findings.length > 0) this.note(out.findings.map((f) => ({ ...f, field, inKey: false, where })));
    return out.text;
  }

  /** Any JSON value about to leave the worker under `field` (an error's details in a reply), redacted. */
  value<T>(where: LeakPlace, field: string, value: T): T {
    const out = redactJson(this.scanner(), value);
    if (out.findings.length > 0) this.note(out.findings.map((f) => ({ ...f, field: f.field === '' ? field : `${field}.${f.field}`, where })));
    return out.value;
  }

  /** A log filter that redacts every field and notes what it found. */
  readonly logFilter: LogFilter = (fields) => {
    const out = redactJson(this.scanner(), fields);
    if (out.findings.length > 0) this.note(out.findings.map((f) => ({ ...f, where: 'log' as const })));
    return out.value;
  };

  /** The findings not handed out before, in the order found (each handed out once). */
  takeUnrecorded(): Leak[] {
    const fresh = this.leaks.slice(this.recorded);
    this.recorded = this.leaks.length;
    return fresh;
  }

  private note(leaks: readonly Leak[]): void {
    const first = this.leaks.length === 0;
    this.leaks.push(...leaks);
    if (first) this.onLeak();
  }
}

/** One `secret.redacted` for a finding: where it was about to go, which field, pattern and secret name — never the value. */
export function leakRedactedFields(leak: Leak, stepIndex?: number | null): EventFields<'secret.redacted'> {
  const fields: EventFields<'secret.redacted'> = { where: leak.where, pattern: leak.pattern, count: leak.count };
  if (stepIndex !== undefined && stepIndex !== null) fields.step_index = stepIndex;
  if (leak.receiptType !== undefined) fields.receipt_type = leak.receiptType;
  const field = fieldToken(leak.field);
  if (field !== undefined) fields.field = field;
  if (leak.inKey) fields.in_key = true;
  if (leak.secret !== null) fields.secret = leak.secret;
  return fields;
}

/** `secret TOKEN (secret.plain ×1) in a name in run.executed artifact_hashes`: names and counts only. */
export function describeLeaks(leaks: readonly Leak[]): string {
  const seen = [...new Set(leaks.map((l) => (l.secret === null ? `${l.pattern} ×${l.count}` : `secret ${l.secret} (${l.pattern} ×${l.count})`)))];
  const places = [
    ...new Set(
      leaks.map((l) => {
        const what = l.inKey ? 'a name in' : 'the';
        const field = fieldToken(l.field) ?? 'a field';
        return l.where === 'receipt' ? `${what} ${field} of ${l.receiptType ?? 'a receipt'}` : l.where === 'reply' ? `an answer's ${field}` : `a log line's ${field}`;
      }),
    ),
  ];
  return boundedText(`${seen.join(', ')} in ${places.join(', ')}`, 1500);
}
