import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { runServiceMain } from '@cairn/service-kit';
import { VerifierConfigSchema } from './verifier.config.js';
import { VERIFIER_SERVICE, verifierModule } from './verifier.module.js';

await runServiceMain(VERIFIER_SERVICE, () => verifierModule(loadConfig(VerifierConfigSchema)));
