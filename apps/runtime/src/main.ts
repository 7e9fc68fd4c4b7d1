import 'reflect-metadata';
import { runServiceMain } from '@cairn/service-kit';
import { loadRuntimeConfig } from './runtime.config.js';
import { RUNTIME_SERVICE, runtimeModule } from './runtime.module.js';

await runServiceMain(RUNTIME_SERVICE, () => runtimeModule(loadRuntimeConfig()));
