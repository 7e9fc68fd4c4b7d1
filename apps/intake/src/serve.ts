import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { runServiceMain } from '@cairn/service-kit';
import { IntakeConfigSchema } from './intake.config.js';
import { INTAKE_SERVICE, intakeModule } from './intake.module.js';

await runServiceMain(INTAKE_SERVICE, () => intakeModule(loadConfig(IntakeConfigSchema)));
