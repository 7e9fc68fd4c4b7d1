import type { SecretAccess } from '@cairn/policy';
import { SecretStore } from '@cairn/secret-store';
import { SERVICE_CONFIG } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { OnModuleDestroy } from '@nestjs/common';
import type { PolicyServiceConfig } from './policy.config.js';

/**
 * The secrets a run asks for as the tenant's store holds them — names and grants only: policy
 * holds no key and never sees a value (I-7). The store is opened on first use, so runs without
 * secrets never need it; a store that cannot be reached fails the decision, which is retried
 * (fail closed).
 */
@Injectable()
export class SecretAccessRepository implements OnModuleDestroy {
  private store: Promise<SecretStore> | null = null;

  constructor(@Inject(SERVICE_CONFIG) private readonly config: PolicyServiceConfig) {}

  /** The named secrets the tenant has, each with its grantees; a name the tenant lacks is not in the answer. */
  async of(tenant: string, names: readonly string[]): Promise<SecretAccess[]> {
    this.store ??= SecretStore.open({ url: this.config.CAIRN_DATABASE_URL, applicationName: 'cairn-policy-secrets' });
    try {
      return await (await this.store).access(tenant, names);
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
