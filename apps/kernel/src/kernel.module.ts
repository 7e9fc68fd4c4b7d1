import { ArtifactLoader, RunScanners, ServiceRuntimeModule } from '@cairn/service-kit';
import type { DynamicModule } from '@nestjs/common';
import { KernelFactsHandler } from './kernel-facts.handler.js';
import type { KernelConfig } from './kernel.config.js';

export const KERNEL_SERVICE = 'kernel';

/** The kernel service: a reactor over `run.executed` that appends `kernel.facts`. */
export function kernelModule(config: KernelConfig): DynamicModule {
  return ServiceRuntimeModule.forRoot({
    service: KERNEL_SERVICE,
    config,
    handler: KernelFactsHandler,
    ackWaitMs: config.CAIRN_KERNEL_ACK_WAIT_MS,
    providers: [ArtifactLoader.provider(config), RunScanners.provider(config)],
  });
}
