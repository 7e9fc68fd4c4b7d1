export { KernelConfigSchema } from './kernel.config.js';
export type { KernelConfig } from './kernel.config.js';
export { KernelFactsHandler } from './kernel-facts.handler.js';
export { KERNEL_SERVICE, kernelModule } from './kernel.module.js';
