import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { runServiceMain } from '@cairn/service-kit';
import { SchedulerConfigSchema } from './scheduler.config.js';
import { SCHEDULER_SERVICE, schedulerModule } from './scheduler.module.js';

await runServiceMain(SCHEDULER_SERVICE, () => schedulerModule(loadConfig(SchedulerConfigSchema)));
