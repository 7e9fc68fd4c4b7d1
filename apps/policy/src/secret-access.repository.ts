import type { SecretAccess } from '@cairn/policy';
import { SecretCatalog } from '@cairn/secret-store';
import { NATS_CONNECTION, SERVICE_CONFIG } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import type { PolicyServiceConfig } from './policy.config.js';

/**
 * The secrets a run asks for as the stack's catalog bucket holds them (ADR 0028) — names and grants
 * only: policy holds no key and never sees a value (I-7); its NATS user may read the bucket, never
 * write it. The bucket is opened on first use, so runs without secrets never need it; a catalog that
 * cannot be reached fails the decision, which is retried (fail closed).
 */
@Injectable()
export class SecretAccessRepository {
  private catalog: Promise<SecretCatalog> | null = null;

  constructor(
    @Inject(SERVICE_CONFIG) private readonly config: PolicyServiceConfig,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
  ) {}

  /** The named secrets the tenant has, each with its grantees; a name the tenant lacks is not in the answer. */
  async of(tenant: string, names: readonly string[]): Promise<SecretAccess[]> {
    this.catalog ??= SecretCatalog.open(this.nc, { bucket: this.config.CAIRN_SECRETS_BUCKET, replicas: this.config.CAIRN_NATS_REPLICAS });
    try {
      return await (await this.catalog).access(tenant, names);
    } catch (error) {
      // Opened badly (the broker was down): try again next time.
      this.catalog = null;
      throw error;
    }
  }
}
