import { CairnError, SecretGranteeSchema, SecretNameSchema, TenantIdSchema } from '@cairn/contracts';
import { isWrongRevision, kvCall, openBucket } from '@cairn/operational';
import { boxKeyIdOf, checkSecretName, checkSecretValue, lastFour, openSealedBox, sealToPublicKey } from '@cairn/secrets';
import type { BoxKeyring, BoxPublicKey, ScannedSecret } from '@cairn/secrets';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { KV, KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import type { PutOptions, PutOutcome, SecretAccess, SecretGrant, SecretListing } from './secret-store.adapter.js';

/*
 * The secret catalog on NATS (ADR 0028): one JetStream KV bucket of the stack (CAIRN_SECRETS_BUCKET),
 * one key per secret, `<tenant>.<name>` — both checked against their schemas first ([a-z0-9_-] and
 * [A-Z0-9_]: KV-safe tokens, no `.`, `*` or `>`), so the key is the identity and nothing needs
 * escaping. The value is a JSON record: the value sealed to the deployment's public key (base64),
 * the key id, the last four characters, who set it and when, and its grants. The gateway writes it
 * (every change a compare-and-set on the key's revision, retried on a lost race, so a record is
 * never torn and never loses a concurrent grant); policy reads names and grants; the runtime
 * workers read the sealed values and open them with the private key. Never in the evidence stream.
 */

/** A secret's record as the bucket holds it. */
export const SecretRecordSchema = z.strictObject({
  v: z.literal(1),
  tenant: TenantIdSchema,
  name: SecretNameSchema,
  /** The box (`@cairn/secrets` sealed-box), base64. */
  sealed: z.string().regex(/^[A-Za-z0-9+/]+={0,2}$/).max(64 * 1024),
  key_id: z.string().regex(/^[0-9a-f]{16}$/),
  last_four: z.string().max(16),
  set_by: z.string().max(200).nullable(),
  created_at: z.string().datetime(),
  updated_at: z.string().datetime(),
  grants: z
    .array(z.strictObject({ grantee: SecretGranteeSchema, granted_by: z.string().max(200), granted_at: z.string().datetime() }))
    .max(1024),
});
export type SecretRecord = z.infer<typeof SecretRecordSchema>;

/** A stack's catalog bucket: one value per key, no expiry; a record is at most ~45 KiB sealed plus its grants. */
export const SECRET_CATALOG_LIMITS = { history: 1, ttlMs: 0, maxBytes: 256 * 1024 * 1024, maxValueBytes: 256 * 1024 } as const;
/** How many lost compare-and-set races a change retries before it answers E_CONFLICT. */
const MAX_RACES = 32;

/** A value of the PostgreSQL store, opened with the old AES key, on its way to the catalog. */
export interface LegacySecret {
  tenant: string;
  name: string;
  value: Uint8Array;
  setBy: string | null;
  createdAt: Date;
  updatedAt: Date;
  grants: SecretGrant[];
}

export interface SecretCatalogOptions {
  bucket: string;
  replicas?: number;
  /** The public key values are sealed to: the writer (the gateway) needs it; readers do not. */
  publicKey?: BoxPublicKey | null;
}

function checkTenant(tenant: string): string {
  if (!TenantIdSchema.safeParse(tenant).success) throw new CairnError('E_INPUT', `not a tenant id: ${JSON.stringify(tenant.slice(0, 80))}`);
  return tenant;
}

function checkGrantees(grantees: readonly string[]): string[] {
  for (const grantee of grantees) {
    if (!SecretGranteeSchema.safeParse(grantee).success) throw new CairnError('E_INPUT', `not a grantee: ${JSON.stringify(grantee.slice(0, 80))} (key:<key id> or scope:<scope>)`, { grantee: grantee.slice(0, 80) });
  }
  return [...new Set(grantees)];
}

/** The bucket key of a secret (tenant and name checked first). */
export function secretKeyOf(tenant: string, name: string): string {
  return `${checkTenant(tenant)}.${checkSecretName(name)}`;
}

function byGrantee(a: { grantee: string }, b: { grantee: string }): number {
  return a.grantee < b.grantee ? -1 : a.grantee > b.grantee ? 1 : 0;
}

interface Held {
  /** null: the key holds a record that breaks its schema or names another secret (edited in the bucket). */
  record: SecretRecord | null;
  revision: number;
  created: Date;
}

/**
 * A change to one record: the new record, or `null` to delete it, or `undefined` to leave it as it
 * is (the answer is then computed from what is stored). Throwing aborts and writes nothing.
 */
type Change = (stored: SecretRecord | null, present: boolean) => SecretRecord | null | undefined;

export class SecretCatalog {
  private jsm: Promise<JetStreamManager> | null = null;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly kv: KV,
    readonly bucket: string,
    private readonly publicKey: BoxPublicKey | null,
  ) {}

  /** Opens the bucket (made with its limits when absent — `cairn up` makes it first, with the operator's user). */
  static async open(nc: NatsConnection, options: SecretCatalogOptions): Promise<SecretCatalog> {
    const kv = await openBucket(nc, options.bucket, SECRET_CATALOG_LIMITS, options.replicas);
    return new SecretCatalog(nc, kv, options.bucket, options.publicKey ?? null);
  }

  /** The id of the key new values are sealed to; null for a reader. */
  get keyId(): string | null {
    return this.publicKey?.id ?? null;
  }

  /**
   * Seals and stores `value` under (tenant, name), replacing an earlier value, and grants it to the
   * key that set it and to `options.grants` (grants already held stay) — one compare-and-set.
   * `guard` sees the stored record first (the caller's authorisation, on the revision it writes).
   */
  async put(tenant: string, name: string, value: Uint8Array, options: PutOptions & { guard?: (stored: SecretRecord | null) => void } = {}): Promise<PutOutcome> {
    const publicKey = this.sealer();
    const key = secretKeyOf(tenant, name);
    checkSecretValue(value);
    const setBy = options.setBy ?? null;
    const grantees = checkGrantees([...(setBy?.startsWith('key:') === true ? [setBy] : []), ...(options.grants ?? [])]);
    if (grantees.length > 0 && setBy === null) throw new CairnError('E_INTERNAL', `granting ${name} needs the actor that grants it`);
    const sealed = Buffer.from(sealToPublicKey(publicKey, { tenant, name }, value)).toString('base64');
    const shown = lastFour(value);
    let created = false;
    const stored = await this.change(key, (old) => {
      options.guard?.(old);
      const now = new Date().toISOString();
      created = old === null;
      const grants = [...(old?.grants ?? [])];
      for (const grantee of grantees) if (!grants.some((g) => g.grantee === grantee)) grants.push({ grantee, granted_by: setBy ?? '', granted_at: now });
      return {
        v: 1,
        tenant,
        name,
        sealed,
        key_id: publicKey.id,
        last_four: shown,
        set_by: setBy,
        created_at: old?.created_at ?? now,
        updated_at: now,
        grants: grants.sort(byGrantee),
      };
    });
    if (stored === null) throw new CairnError('E_INTERNAL', `storing secret ${name} left no record`);
    return { name, created, lastFour: shown, createdAt: new Date(stored.created_at), updatedAt: new Date(stored.updated_at) };
  }

  /** Removes a secret; false when the tenant has none of that name. */
  async delete(tenant: string, name: string, guard?: (stored: SecretRecord) => void): Promise<boolean> {
    let found = false;
    await this.change(secretKeyOf(tenant, name), (old, present) => {
      found = present;
      if (!present) return undefined;
      // A broken record (edited in the bucket) has no grants to check: it is removed as it is.
      if (old !== null) guard?.(old);
      return null;
    });
    return found;
  }

  /** Grants `name` to `grantees` as `grantedBy` (grants held stay as they were); E_NOT_FOUND without the secret. Answers its grants now. */
  async grant(tenant: string, name: string, grantees: readonly string[], grantedBy: string, guard?: (stored: SecretRecord) => void): Promise<SecretGrant[]> {
    const adding = checkGrantees(grantees);
    const stored = await this.change(secretKeyOf(tenant, name), (old) => {
      if (old === null) throw new CairnError('E_NOT_FOUND', `no secret ${name}`, { name });
      guard?.(old);
      const now = new Date().toISOString();
      const fresh = adding.filter((grantee) => !old.grants.some((g) => g.grantee === grantee));
      if (fresh.length === 0) return undefined;
      return { ...old, grants: [...old.grants, ...fresh.map((grantee) => ({ grantee, granted_by: grantedBy, granted_at: now }))].sort(byGrantee) };
    });
    return grantsView(stored);
  }

  /** Takes a grant back; false when `name` had no such grant (E_NOT_FOUND-free: the caller says what is missing). */
  async revoke(tenant: string, name: string, grantee: string, guard?: (stored: SecretRecord) => void): Promise<boolean> {
    const [checked] = checkGrantees([grantee]);
    let revoked = false;
    await this.change(secretKeyOf(tenant, name), (old) => {
      revoked = false;
      if (old === null) return undefined;
      guard?.(old);
      if (!old.grants.some((g) => g.grantee === checked)) return undefined;
      revoked = true;
      return { ...old, grants: old.grants.filter((g) => g.grantee !== checked) };
    });
    return revoked;
  }

  /** The record of one secret, or null; a record that breaks its schema or names another secret is E_INTERNAL (never guessed at). */
  async record(tenant: string, name: string): Promise<SecretRecord | null> {
    const held = await this.held(secretKeyOf(tenant, name));
    if (held === null) return null;
    if (held.record === null) throw new CairnError('E_INTERNAL', `the secret catalog's record of ${name} is malformed or names another secret: not used`, { name, reason: 'tampered' });
    return held.record;
  }

  /** The tenant's secret names, sorted. */
  async names(tenant: string): Promise<string[]> {
    return (await this.keysOf(tenant)).map((key) => key.slice(tenant.length + 1));
  }

  /** Who may use each of the tenant's secrets (`names` only, or all of them), sorted by name; a name the catalog lacks is not in the answer. */
  async access(tenant: string, names?: readonly string[]): Promise<SecretAccess[]> {
    checkTenant(tenant);
    const wanted = names === undefined ? await this.names(tenant) : [...new Set(names.map(checkSecretName))].sort();
    const out: SecretAccess[] = [];
    for (const name of wanted) {
      // A broken record counts as no secret: a run naming it is refused, and it may be set again.
      const record = (await this.held(secretKeyOf(tenant, name)))?.record ?? null;
      if (record !== null) out.push({ name, grantees: record.grants.map((g) => g.grantee) });
    }
    return out;
  }

  /** The grants of one secret, by grantee (none for a secret the tenant lacks). */
  async grantsOf(tenant: string, name: string): Promise<SecretGrant[]> {
    return grantsView(await this.record(tenant, name));
  }

  /** The tenant's secrets with the last four characters of each value, who set it and its grants, sorted by name. */
  async list(tenant: string): Promise<SecretListing[]> {
    const out: SecretListing[] = [];
    for (const name of await this.names(tenant)) {
      const held = await this.held(secretKeyOf(tenant, name));
      if (held === null) continue;
      const record = held.record;
      if (record === null) {
        // Edited in the bucket: listed, so that an admin sees it and sets it again; never used.
        out.push({ name, lastFour: null, keyId: '0000000000000000', setBy: null, grants: [], createdAt: held.created, updatedAt: held.created });
        continue;
      }
      const sealedTo = boxKeyIdOf(Buffer.from(record.sealed, 'base64'));
      out.push({
        name,
        lastFour: sealedTo === record.key_id ? record.last_four : null,
        keyId: record.key_id,
        setBy: record.set_by,
        grants: grantsView(record),
        createdAt: new Date(record.created_at),
        updatedAt: new Date(record.updated_at),
      });
    }
    return out;
  }

  /**
   * The values of `names` for a run of `tenant`, opened with `keyring` (the runtime workers only). A
   * name the catalog lacks is E_NOT_FOUND naming it; a value that does not open (edited, moved from
   * another secret, sealed to a key the keyring lacks) is E_INTERNAL naming it. The caller zeroes
   * the values when done with them.
   */
  async read(keyring: BoxKeyring, tenant: string, names: readonly string[]): Promise<ScannedSecret[]> {
    checkTenant(tenant);
    const wanted = [...new Set(names.map(checkSecretName))];
    const records = await Promise.all(wanted.map(async (name) => ({ name, record: await this.record(tenant, name) })));
    const missing = records.filter((r) => r.record === null).map((r) => r.name);
    if (missing.length > 0) throw new CairnError('E_NOT_FOUND', `the secret store of tenant ${tenant} has no ${missing.join(', ')}`, { missing });
    const opened: ScannedSecret[] = [];
    try {
      for (const { name, record } of records) opened.push({ name, value: openSealedBox(keyring, { tenant, name }, Buffer.from(record!.sealed, 'base64')) });
    } catch (error) {
      for (const secret of opened) secret.value.fill(0);
      throw error;
    }
    return opened;
  }

  /**
   * Key rotation, where the private keys are (`cairn secrets reseal`): every value sealed to a key
   * other than `keyring.current` is opened and sealed to the current key, one compare-and-set each
   * (a record changed meanwhile is read again). Returns how many were re-sealed and which
   * (tenant/name) no key of the keyring opens — those stay as they are.
   */
  async reseal(keyring: BoxKeyring): Promise<{ resealed: number; unreadable: string[] }> {
    const current = keyring.current.publicKey;
    let resealed = 0;
    const unreadable: string[] = [];
    for (const key of await this.allKeys()) {
      const dot = key.indexOf('.');
      const ref = { tenant: key.slice(0, dot), name: key.slice(dot + 1) };
      try {
        let wrote = false;
        await this.change(key, (old, present) => {
          wrote = false;
          // A broken record (edited in the bucket) is not guessed at: named as unreadable.
          if (present && old === null) throw new CairnError('E_INTERNAL', `the record of ${ref.name} is malformed`, { reason: 'malformed' });
          if (old === null || old.key_id === current.id) return undefined;
          const value = openSealedBox(keyring, ref, Buffer.from(old.sealed, 'base64'));
          try {
            wrote = true;
            return { ...old, sealed: Buffer.from(sealToPublicKey(current, ref, value)).toString('base64'), key_id: current.id };
          } finally {
            value.fill(0);
          }
        });
        if (wrote) resealed++;
      } catch (error) {
        if (error instanceof CairnError && error.code === 'E_INTERNAL') unreadable.push(`${ref.tenant}/${ref.name}`);
        else throw error;
      }
    }
    return { resealed, unreadable };
  }

  /**
   * A secret moved from the PostgreSQL store (ADR 0028): sealed to the public key and written only
   * when the catalog has no secret of that name (the catalog wins: a value set there is newer).
   * Returns whether it was written; either way the PostgreSQL row may go.
   */
  async importIfAbsent(entry: LegacySecret): Promise<boolean> {
    const publicKey = this.sealer();
    const key = secretKeyOf(entry.tenant, entry.name);
    checkSecretValue(entry.value);
    const record = SecretRecordSchema.parse({
      v: 1,
      tenant: entry.tenant,
      name: entry.name,
      sealed: Buffer.from(sealToPublicKey(publicKey, entry, entry.value)).toString('base64'),
      key_id: publicKey.id,
      last_four: lastFour(entry.value),
      set_by: entry.setBy,
      created_at: entry.createdAt.toISOString(),
      updated_at: entry.updatedAt.toISOString(),
      grants: entry.grants.map((g) => ({ grantee: g.grantee, granted_by: g.grantedBy, granted_at: g.grantedAt.toISOString() })).sort(byGrantee),
    });
    let written = false;
    await this.change(key, (_old, present) => {
      if (present) return undefined;
      written = true;
      return record;
    });
    return written;
  }

  /** The id of the key a stored value is sealed to, as its bytes say (tests, diagnostics). */
  async sealedKeyIdOf(tenant: string, name: string): Promise<string | null> {
    const record = await this.record(tenant, name);
    return record === null ? null : boxKeyIdOf(Buffer.from(record.sealed, 'base64'));
  }

  private sealer(): BoxPublicKey {
    if (this.publicKey === null) throw new CairnError('E_INTERNAL', 'this secret catalog was opened without the secrets public key, so it cannot seal values');
    return this.publicKey;
  }

  private async held(key: string): Promise<Held | null> {
    const entry = await kvCall(`cannot read the secret catalog`, () => this.kv.get(key));
    return decodeRecord(key, entry);
  }

  /** One compare-and-set change of a record, retried on a lost race; answers the record as it stands after. */
  private async change(key: string, change: Change): Promise<SecretRecord | null> {
    for (let attempt = 0; attempt < MAX_RACES; attempt++) {
      const held = await this.held(key);
      // A broken record is as good as none to a change: it may be set again or removed, never granted.
      const next = change(held?.record == null ? null : structuredClone(held.record), held !== null);
      if (next === undefined) return held?.record ?? null;
      try {
        if (next === null) {
          if (held === null) return null;
          await this.kv.delete(key, { previousSeq: held.revision });
        } else {
          const text = JSON.stringify(SecretRecordSchema.parse(next));
          if (held === null) await this.kv.create(key, text);
          else await this.kv.update(key, text, held.revision);
        }
        return next;
      } catch (error) {
        if (isLostRace(error)) {
          await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 5 * (attempt + 1))));
          continue;
        }
        throw new CairnError('E_UNAVAILABLE', `cannot write the secret catalog: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    throw new CairnError('E_CONFLICT', `secret ${key.slice(key.indexOf('.') + 1)} is being changed by many writers at once: try again`);
  }

  private async keysOf(tenant: string): Promise<string[]> {
    return this.listKeys(`${checkTenant(tenant)}.*`);
  }

  private async allKeys(): Promise<string[]> {
    return this.listKeys('>');
  }

  /** Keys from the stream's subject index (one request, no consumer; a deleted key's marker is skipped when read). */
  private async listKeys(filter: string): Promise<string[]> {
    const prefix = `$KV.${this.bucket}.`;
    return kvCall('cannot list the secret catalog', async () => {
      this.jsm ??= jetstreamManager(this.nc);
      const info = await (await this.jsm).streams.info(`KV_${this.bucket}`, { subjects_filter: `${prefix}${filter}` });
      const keys = Object.keys(info.state.subjects ?? {})
        .filter((subject) => subject.startsWith(prefix))
        .map((subject) => subject.slice(prefix.length))
        .sort();
      const live: string[] = [];
      for (const key of keys) if ((await this.kv.get(key))?.operation === 'PUT') live.push(key);
      return live;
    });
  }
}

function isLostRace(error: unknown): boolean {
  if (isWrongRevision(error)) return true;
  // `create` of a key that exists answers as a wrong last sequence too, in some client versions as a plain error.
  return error instanceof Error && /wrong last sequence|key exists/i.test(error.message);
}

function decodeRecord(key: string, entry: KvEntry | null): Held | null {
  if (entry === null || entry.operation !== 'PUT') return null;
  let raw: unknown;
  try {
    raw = entry.json<unknown>();
  } catch {
    raw = undefined;
  }
  const parsed = SecretRecordSchema.safeParse(raw);
  const intact = parsed.success && `${parsed.data.tenant}.${parsed.data.name}` === key;
  return { record: intact ? parsed.data : null, revision: entry.revision, created: entry.created };
}

function grantsView(record: SecretRecord | null): SecretGrant[] {
  return (record?.grants ?? []).map((g) => ({ grantee: g.grantee, grantedBy: g.granted_by, grantedAt: new Date(g.granted_at) }));
}
