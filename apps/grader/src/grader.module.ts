import { FsArtifactStore } from '@cairn/artifact-store';
import { ArtifactLoader, JsonLogger, RunScanners, ServiceRuntimeModule } from '@cairn/service-kit';
import type { DynamicModule } from '@nestjs/common';
import type { GraderConfig } from './grader.config.js';
import { GradingHandler } from './grading.handler.js';

export const GRADER_SERVICE = 'grader';

/** The grader service: grades verified runs and seals every run that is over. */
export function graderModule(config: GraderConfig): DynamicModule {
  new JsonLogger(GRADER_SERVICE).write('info', 'reading artifacts', { dir: config.CAIRN_ARTIFACT_DIR });
  const loader = new ArtifactLoader(new FsArtifactStore(config.CAIRN_ARTIFACT_DIR), {
    maxArtifactBytes: config.CAIRN_ARTIFACT_READ_MAX_BYTES,
    maxRunBytes: config.CAIRN_RUN_READ_MAX_BYTES,
  });
  return ServiceRuntimeModule.forRoot({
    service: GRADER_SERVICE,
    config,
    handler: GradingHandler,
    ackWaitMs: config.CAIRN_GRADER_ACK_WAIT_MS,
    providers: [{ provide: ArtifactLoader, useValue: loader }, RunScanners.provider(config, 'cairn-grader-secrets')],
  });
}
