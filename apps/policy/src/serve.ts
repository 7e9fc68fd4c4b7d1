import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { runServiceMain } from '@cairn/service-kit';
import { PolicyServiceConfigSchema } from './policy.config.js';
import { POLICY_SERVICE, policyModule } from './policy.module.js';

await runServiceMain(POLICY_SERVICE, () => policyModule(loadConfig(PolicyServiceConfigSchema)));
