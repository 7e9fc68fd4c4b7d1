import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { runServiceMain } from '@cairn/service-kit';
import { WebhooksConfigSchema } from './webhooks.config.js';
import { WEBHOOKS_SERVICE, webhooksModule } from './webhooks.module.js';

await runServiceMain(WEBHOOKS_SERVICE, () => webhooksModule(loadConfig(WebhooksConfigSchema)));
