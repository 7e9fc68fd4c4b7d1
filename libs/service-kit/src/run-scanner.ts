import type { SecretValuesConfig } from '@cairn/config';
import type { EventType, EvidenceReceipt } from '@cairn/contracts';
import { SecretValuesReader } from '@cairn/secret-store';
import { OutputScanner, redactJson } from '@cairn/secrets';
import type { FieldFinding, ScannedSecret } from '@cairn/secrets';
import type { OnApplicationShutdown, Provider } from '@nestjs/common';
import type { ReactionContext } from './reaction-context.js';

/*
 * The kernel, verifier and grader read a run's outputs and derive text from them — a test's name, a
 * bail reason, a JSON value, a check's detail — which may decode to a secret the runtime could not
 * see in the raw bytes (an XML entity, a JSON `\u` escape). What they append is scanned with the
 * run's own secrets first (issue 13); a finding ends the run E_SECRET_SEEN instead.
 */

/** The secret names a run's chain lists (`run.submitted`'s spec), and its tenant. */
function secretsOf(receipts: readonly EvidenceReceipt[]): { tenant: string; names: string[] } | null {
  const submitted = receipts.find((r) => r.type === 'run.submitted');
  if (submitted?.type !== 'run.submitted') return null;
  return { tenant: submitted.tenant, names: [...(submitted.spec.secrets ?? [])] };
}

/** Builds the scanner for a run: its secrets' values (read from the store, then zeroed) and the key patterns. */
export class RunScanners implements OnApplicationShutdown {
  constructor(private readonly reader: SecretValuesReader) {}

  /** A Nest provider of `RunScanners` over the service's key file and database (`applicationName` names its connections). */
  static provider(config: SecretValuesConfig, applicationName: string): Provider {
    return { provide: RunScanners, useFactory: () => RunScanners.create(config, applicationName) };
  }

  static async create(config: SecretValuesConfig, applicationName: string): Promise<RunScanners> {
    return new RunScanners(await SecretValuesReader.fromKeyFile(config.CAIRN_SECRETS_KEY_FILE, config.CAIRN_DATABASE_URL, applicationName));
  }

  async forRun(receipts: readonly EvidenceReceipt[]): Promise<OutputScanner> {
    const listed = secretsOf(receipts);
    if (listed === null || listed.names.length === 0) return new OutputScanner([]);
    let values: ScannedSecret[] = [];
    try {
      values = await this.reader.read(listed.tenant, listed.names);
      return new OutputScanner(values);
    } finally {
      for (const secret of values) secret.value.fill(0);
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.reader.close();
  }
}

/** A receipt's fields redacted with `scanner`, and what was found. */
export function scanFields<T extends Record<string, unknown>>(scanner: OutputScanner, fields: T): { fields: T; findings: readonly FieldFinding[] } {
  const out = redactJson(scanner, fields);
  return { fields: out.value, findings: out.findings };
}

/**
 * A secret was found in what this service was about to append as `receiptType` (never appended):
 * one `secret.redacted` per finding (where `receipt`, the field, the pattern and secret name), a
 * critical `alert.raised`, and `run.failed` E_SECRET_SEEN — the run ends ROLLBACK, and the grader
 * seals it. One atomic batch, guarded on the head the reaction decided from.
 */
export async function endRunSecretSeen(ctx: ReactionContext, headSeq: number, receiptType: string, findings: readonly FieldFinding[]): Promise<void> {
  const items: { type: EventType; fields: Record<string, unknown>; key: string }[] = [];
  for (const [i, finding] of findings.slice(0, 64).entries()) {
    const fields: Record<string, unknown> = { where: 'receipt', receipt_type: receiptType, pattern: finding.pattern, count: finding.count };
    if (/^[a-z0-9][a-z0-9_.-]{0,63}$/.test(finding.field)) fields.field = finding.field;
    if (finding.inKey) fields.in_key = true;
    if (finding.secret !== null) fields.secret = finding.secret;
    items.push({ type: 'secret.redacted', fields, key: `${receiptType}-${i}` });
  }
  const seen = [...new Set(findings.map((f) => (f.secret === null ? `${f.pattern} ×${f.count}` : `secret ${f.secret} (${f.pattern} ×${f.count})`)))].join(', ');
  const fieldsSeen = [...new Set(findings.map((f) => f.field).filter((f) => /^[a-z0-9][a-z0-9_.-]{0,63}$/.test(f)))].join(', ');
  const message = `E_SECRET_SEEN: ${seen} in ${fieldsSeen === '' ? 'what' : `the ${fieldsSeen} of what`} ${ctx.service} derived from the run's outputs (${receiptType}); not recorded, and the run is stopped`.slice(0, 2000);
  items.push({ type: 'alert.raised', fields: { severity: 'critical', error_code: 'E_SECRET_SEEN', message }, key: receiptType });
  items.push({ type: 'run.failed', fields: { error_code: 'E_SECRET_SEEN', message }, key: `secret-${receiptType}` });
  // All of them or none: a run is never left with the redactions and no end.
  await ctx.appendAllAt(headSeq, items);
}
