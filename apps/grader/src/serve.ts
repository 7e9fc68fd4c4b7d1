import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { runServiceMain } from '@cairn/service-kit';
import { GraderConfigSchema } from './grader.config.js';
import { GRADER_SERVICE, graderModule } from './grader.module.js';

await runServiceMain(GRADER_SERVICE, () => graderModule(loadConfig(GraderConfigSchema)));
