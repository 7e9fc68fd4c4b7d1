import { WorkerRegistry } from '@cairn/operational';
import { policyVersion } from '@cairn/policy';
import { JsonLogger, NATS_CONNECTION, ServiceRuntimeModule } from '@cairn/service-kit';
import type { NatsConnection } from '@nats-io/transport-node';
import type { DynamicModule } from '@nestjs/common';
import { UsageLedgerService } from './usage-ledger.service.js';
import { loadPolicyDocument } from './policy-document.loader.js';
import { POLICY_DOCUMENT, PolicyDecisionHandler } from './policy-decision.handler.js';
import { SecretAccessRepository } from './secret-access.repository.js';
import type { PolicyServiceConfig } from './policy.config.js';

export const POLICY_SERVICE = 'policy';

/** The policy service: a reactor over `run.submitted`. The policy file is read and validated here, at boot. */
export function policyModule(config: PolicyServiceConfig): DynamicModule {
  const policy = loadPolicyDocument(config.CAIRN_POLICY_FILE);
  new JsonLogger(POLICY_SERVICE).write('info', 'policy in force', { policy_version: policyVersion(policy), file: config.CAIRN_POLICY_FILE ?? null });
  return ServiceRuntimeModule.forRoot({
    service: POLICY_SERVICE,
    config,
    handler: PolicyDecisionHandler,
    providers: [
      { provide: POLICY_DOCUMENT, useValue: policy },
      UsageLedgerService,
      SecretAccessRepository,
      {
        provide: WorkerRegistry,
        inject: [NATS_CONNECTION],
        useFactory: (nc: NatsConnection) => WorkerRegistry.open(nc, { bucket: config.CAIRN_WORKERS_BUCKET, replicas: config.CAIRN_NATS_REPLICAS, observe: true }),
      },
    ],
  });
}
