import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { runServiceMain } from '@cairn/service-kit';
import { KernelConfigSchema } from './kernel.config.js';
import { KERNEL_SERVICE, kernelModule } from './kernel.module.js';

await runServiceMain(KERNEL_SERVICE, () => kernelModule(loadConfig(KernelConfigSchema)));
