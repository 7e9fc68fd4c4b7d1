import { FsArtifactStore } from '@cairn/artifact-store';
import { ArtifactLoader, JsonLogger, RunScanners, ServiceRuntimeModule } from '@cairn/service-kit';
import type { DynamicModule } from '@nestjs/common';
import { VerificationHandler } from './verification.handler.js';
import type { VerifierConfig } from './verifier.config.js';

export const VERIFIER_SERVICE = 'verifier';

/** The verifier service: a reactor over `kernel.facts` that appends `verification.completed`. */
export function verifierModule(config: VerifierConfig): DynamicModule {
  new JsonLogger(VERIFIER_SERVICE).write('info', 'reading artifacts', { dir: config.CAIRN_ARTIFACT_DIR });
  const loader = new ArtifactLoader(new FsArtifactStore(config.CAIRN_ARTIFACT_DIR), {
    maxArtifactBytes: config.CAIRN_ARTIFACT_READ_MAX_BYTES,
    maxRunBytes: config.CAIRN_RUN_READ_MAX_BYTES,
  });
  return ServiceRuntimeModule.forRoot({
    service: VERIFIER_SERVICE,
    config,
    handler: VerificationHandler,
    providers: [{ provide: ArtifactLoader, useValue: loader }, RunScanners.provider(config, 'cairn-verifier-secrets')],
  });
}
