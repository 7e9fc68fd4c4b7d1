import { SecretStore } from '@cairn/secret-store';
import { SERVICE_CONFIG } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { OnModuleDestroy } from '@nestjs/common';
import type { PolicyServiceConfig } from './policy.config.js';

/**
 * The names in a tenant's secret store, for a run that asks for secrets (names only: policy holds
 * no key and never sees a value, I-7). The store is opened on first use, so runs without secrets
 * never need it; a store that cannot be reached fails the decision, which is retried (fail closed).
 */
@Injectable()
export class SecretNamesRepository implements OnModuleDestroy {
  private store: Promise<SecretStore> | null = null;

  constructor(@Inject(SERVICE_CONFIG) private readonly config: PolicyServiceConfig) {}

  async of(tenant: string): Promise<string[]> {
    this.store ??= SecretStore.open({ url: this.config.CAIRN_DATABASE_URL, applicationName: 'cairn-policy-secrets' });
    try {
      return await (await this.store).names(tenant);
    } catch (error) {
      // Opened badly (the database was down): try again next time.
      const failed = this.store;
      this.store = null;
      await failed.then((s) => s.close()).catch(() => undefined);
      throw error;
    }
  }

  async onModuleDestroy(): Promise<void> {
    const pending = this.store;
    this.store = null;
    await (await pending?.catch(() => null))?.close();
  }
}
