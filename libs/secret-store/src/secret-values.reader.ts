import { CairnError } from '@cairn/contracts';
import { readSecretKeyFile } from './secret-key.file.js';
import { SecretStore } from './secret-store.adapter.js';
import type { ScannedSecret, SecretKeyring } from '@cairn/secrets';

/**
 * The secret store as a service that needs values uses it — the runtime, to provide them to a
 * sandbox; the kernel, verifier and grader, to scan what they derive from a run's outputs: the
 * values a run lists, of the run's tenant, opened with the operator's key file (read and checked at
 * boot: a key file others may read stops the service). The database connection opens on the first
 * run that needs a secret. Without a key file there are no values: `read` of any name is
 * E_RUNTIME_ABSENT (a run that lists secrets fails before any sandbox starts).
 */
export class SecretValuesReader {
  private store: Promise<SecretStore> | null = null;

  private constructor(
    private readonly keyring: SecretKeyring | null,
    private readonly databaseUrl: string,
    private readonly applicationName: string,
  ) {}

  static async fromKeyFile(path: string | undefined, databaseUrl: string, applicationName = 'cairn-secret-values'): Promise<SecretValuesReader> {
    return new SecretValuesReader(path === undefined ? null : await readSecretKeyFile(path), databaseUrl, applicationName);
  }

  get available(): boolean {
    return this.keyring !== null;
  }

  /** The values of `names` for a run of `tenant`; the caller zeroes them when the run is over. */
  async read(tenant: string, names: readonly string[]): Promise<ScannedSecret[]> {
    if (names.length === 0) return [];
    if (this.keyring === null) {
      throw new CairnError('E_RUNTIME_ABSENT', 'this service has no secret store (CAIRN_SECRETS_KEY_FILE): runs that reference secrets cannot be served here');
    }
    const keyring = this.keyring;
    this.store ??= SecretStore.open({ url: this.databaseUrl, keyring, applicationName: this.applicationName });
    let store: SecretStore;
    try {
      store = await this.store;
    } catch (error) {
      this.store = null;
      throw error;
    }
    return store.read(tenant, names);
  }

  async close(): Promise<void> {
    const pending = this.store;
    this.store = null;
    await (await pending?.catch(() => null))?.close();
  }
}
