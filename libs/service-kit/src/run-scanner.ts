import { DEFAULT_SECRETS_BUCKET } from '@cairn/config';
import type { SecretValuesConfig } from '@cairn/config';
import type { NatsConnection } from '@nats-io/transport-node';
import { NATS_CONNECTION } from './service.tokens.js';
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

/**
 * The secret names a run's chain lists (`run.submitted`'s spec) that its policy decision allowed —
 * the only values a worker opens for it (ADR 0028) — and its tenant.
 */
function secretsOf(receipts: readonly EvidenceReceipt[]): { tenant: string; names: string[] } | null {
  const submitted = receipts.find((r) => r.type === 'run.submitted');
  if (submitted?.type !== 'run.submitted') return null;
  const decided = receipts.find((r) => r.type === 'policy.decided');
  const allowed = new Set(decided?.type === 'policy.decided' ? (decided.secrets ?? []) : []);
  return { tenant: submitted.tenant, names: (submitted.spec.secrets ?? []).filter((name) => allowed.has(name)) };
}

/** Builds the scanner for a run: its secrets' values (read from the store, then zeroed) and the key patterns. */
export class RunScanners implements OnApplicationShutdown {
  constructor(private readonly reader: SecretValuesReader) {}

  /** A Nest provider of `RunScanners` over the service's private key file and NATS connection (the catalog bucket, ADR 0028). */
  static provider(config: SecretValuesConfig & { CAIRN_NATS_REPLICAS?: number }): Provider {
    return { provide: RunScanners, inject: [NATS_CONNECTION], useFactory: (nc: NatsConnection) => RunScanners.create(config, nc) };
  }

  /** Without a private key file (or a connection) no run's secrets can be read: a run that lists some is not served. */
  static async create(config: Partial<Pick<SecretValuesConfig, 'CAIRN_SECRETS_PRIVATE_KEY_FILE' | 'CAIRN_SECRETS_BUCKET'>> & { CAIRN_NATS_REPLICAS?: number }, nc: NatsConnection | null): Promise<RunScanners> {
    const source = nc === null ? null : { bucket: config.CAIRN_SECRETS_BUCKET ?? DEFAULT_SECRETS_BUCKET, nc: () => nc, ...(config.CAIRN_NATS_REPLICAS === undefined ? {} : { replicas: config.CAIRN_NATS_REPLICAS }) };
    return new RunScanners(await SecretValuesReader.fromKeyFile(nc === null ? undefined : config.CAIRN_SECRETS_PRIVATE_KEY_FILE, source));
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
