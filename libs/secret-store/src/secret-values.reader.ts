import { CairnError } from '@cairn/contracts';
import { readSecretKeyFile, SecretStore } from '@cairn/secret-store';
import type { ScannedSecret, SecretKeyring } from '@cairn/secrets';

/** Injection token of the runtime's `RuntimeSecrets`. */
export const RUNTIME_SECRETS = Symbol('cairn.runtime-secrets');

/**
 * The secret store as the runtime uses it: the values a run lists, of the run's tenant, opened with
 * the operator's key file (read and checked at boot: a key file others may read stops the worker).
 * The database connection opens on the first run that needs a secret. Without a key file the
 * worker has no secret store, and a run that lists secrets fails E_RUNTIME_ABSENT before any
 * sandbox starts.
 */
export class RuntimeSecrets {
  private store: Promise<SecretStore> | null = null;

  private constructor(
    private readonly keyring: SecretKeyring | null,
    private readonly databaseUrl: string,
  ) {}

  static async fromKeyFile(path: string | undefined, databaseUrl: string): Promise<RuntimeSecrets> {
    return new RuntimeSecrets(path === undefined ? null : await readSecretKeyFile(path), databaseUrl);
  }

  get available(): boolean {
    return this.keyring !== null;
  }

  /** The values of `names` for a run of `tenant`; the caller zeroes them when the run is over. */
  async read(tenant: string, names: readonly string[]): Promise<ScannedSecret[]> {
    if (names.length === 0) return [];
    if (this.keyring === null) {
      throw new CairnError('E_RUNTIME_ABSENT', 'this worker has no secret store (CAIRN_SECRETS_KEY_FILE): runs that reference secrets cannot start here');
    }
    const keyring = this.keyring;
    this.store ??= SecretStore.open({ url: this.databaseUrl, keyring, applicationName: 'cairn-runtime-secrets' });
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
