import { CairnError, isCairnError } from '@cairn/contracts';
import type { BoxKeyring, ScannedSecret } from '@cairn/secrets';
import type { NatsConnection } from '@nats-io/transport-node';
import { readBoxKeyringFile } from './secret-box-key.file.js';
import { SecretCatalog } from './secret-catalog.adapter.js';

/*
 * The secret catalog as a service that needs values uses it (ADR 0028) — the runtime, to provide
 * them to a sandbox; the kernel, verifier and grader, to scan what they derive from a run's
 * outputs: the values a run may use, of the run's tenant, read from the stack's catalog bucket and
 * opened with the deployment's private key file (read and checked at boot: a key file others may
 * read stops the service). The bucket is opened on the first run that needs a secret. Without a
 * private key file there are no values: `read` of any name is E_RUNTIME_ABSENT (a run that lists
 * secrets fails before any sandbox starts).
 */

export interface SecretValuesSource {
  /** The stack's catalog bucket (CAIRN_SECRETS_BUCKET). */
  bucket: string;
  replicas?: number;
  /** The connection the service already holds. */
  nc: () => NatsConnection;
}

export class SecretValuesReader {
  private catalog: Promise<SecretCatalog> | null = null;

  private constructor(
    private keyring: BoxKeyring | null,
    private readonly source: SecretValuesSource | null,
    private readonly path: string | null = null,
  ) {}

  /** From the private key file at `path` (none: no values) and the catalog `source`. */
  static async fromKeyFile(path: string | undefined, source: SecretValuesSource | null): Promise<SecretValuesReader> {
    return new SecretValuesReader(path === undefined ? null : await readBoxKeyringFile(path), source, path ?? null);
  }

  /** A reader over an open catalog (tests, tools). */
  static of(keyring: BoxKeyring | null, catalog: SecretCatalog): SecretValuesReader {
    const reader = new SecretValuesReader(keyring, null);
    reader.catalog = Promise.resolve(catalog);
    return reader;
  }

  get available(): boolean {
    return this.keyring !== null;
  }

  /** The values of `names` for a run of `tenant`; the caller zeroes them when the run is over. */
  async read(tenant: string, names: readonly string[]): Promise<ScannedSecret[]> {
    if (names.length === 0) return [];
    if (this.keyring === null) {
      throw new CairnError('E_RUNTIME_ABSENT', 'this service has no secrets private key (CAIRN_SECRETS_PRIVATE_KEY_FILE): runs that reference secrets cannot be served here');
    }
    const source = this.source;
    if (this.catalog === null) {
      if (source === null) throw new CairnError('E_INTERNAL', 'this secret reader has no catalog');
      this.catalog = SecretCatalog.open(source.nc(), { bucket: source.bucket, ...(source.replicas === undefined ? {} : { replicas: source.replicas }) });
    }
    let catalog: SecretCatalog;
    try {
      catalog = await this.catalog;
    } catch (error) {
      this.catalog = null;
      throw error;
    }
    try {
      return await catalog.read(this.keyring, tenant, names);
    } catch (error) {
      // Sealed to a key this process has not read yet (`cairn secrets rotate-key` ran since it started):
      // the key file is read again, checked as at boot, and the read tried once more.
      if (this.path === null || !isCairnError(error) || error.code !== 'E_INTERNAL' || error.details?.reason !== 'unknown_key') throw error;
      this.keyring = await readBoxKeyringFile(this.path);
      return catalog.read(this.keyring, tenant, names);
    }
  }

  close(): Promise<void> {
    // The connection is the service's own: nothing to close but the handle.
    this.catalog = null;
    return Promise.resolve();
  }
}
