import { FsArtifactStore } from '@cairn/artifact-store';
import { ArtifactLoader, JsonLogger, RunScanners, ServiceRuntimeModule } from '@cairn/service-kit';
import type { DynamicModule } from '@nestjs/common';
import { KernelFactsHandler } from './kernel-facts.handler.js';
import type { KernelConfig } from './kernel.config.js';

export const KERNEL_SERVICE = 'kernel';

/** The kernel service: a reactor over `run.executed` that appends `kernel.facts`. */
export function kernelModule(config: KernelConfig): DynamicModule {
  new JsonLogger(KERNEL_SERVICE).write('info', 'reading artifacts', { dir: config.CAIRN_ARTIFACT_DIR });
  const loader = new ArtifactLoader(new FsArtifactStore(config.CAIRN_ARTIFACT_DIR), {
    maxArtifactBytes: config.CAIRN_ARTIFACT_READ_MAX_BYTES,
    maxRunBytes: config.CAIRN_RUN_READ_MAX_BYTES,
  });
  return ServiceRuntimeModule.forRoot({
    service: KERNEL_SERVICE,
    config,
    handler: KernelFactsHandler,
    providers: [{ provide: ArtifactLoader, useValue: loader }, RunScanners.provider(config, 'cairn-kernel-secrets')],
  });
}
