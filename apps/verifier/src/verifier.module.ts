import { ArtifactLoader, RunScanners, ServiceRuntimeModule } from '@cairn/service-kit';
import type { DynamicModule } from '@nestjs/common';
import { VerificationHandler } from './verification.handler.js';
import type { VerifierConfig } from './verifier.config.js';

export const VERIFIER_SERVICE = 'verifier';

/** The verifier service: a reactor over `kernel.facts` that appends `verification.completed`. */
export function verifierModule(config: VerifierConfig): DynamicModule {
  return ServiceRuntimeModule.forRoot({
    service: VERIFIER_SERVICE,
    config,
    handler: VerificationHandler,
    providers: [ArtifactLoader.provider(config), RunScanners.provider(config)],
  });
}
