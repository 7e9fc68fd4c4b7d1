import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { isCairnError } from '@cairn/contracts';
import { JsonLogger } from '@cairn/service-kit';
import { GatewayConfigSchema } from './gateway.config.js';
import { GATEWAY_SERVICE, startGateway } from './start-gateway.js';

// Config fails at boot, naming the variable (never its value); SIGTERM/SIGINT close cleanly.
const logger = new JsonLogger(GATEWAY_SERVICE);
try {
  const gateway = await startGateway(loadConfig(GatewayConfigSchema), { logger });
  logger.write('info', 'listening', { url: gateway.url, pid: process.pid });
  const stop = (signal: string) => {
    logger.write('info', 'stopping', { signal });
    gateway.close().then(
      () => {
        logger.write('info', 'stopped', { signal });
        process.exit(0);
      },
      (error: unknown) => {
        logger.write('error', 'failed to stop cleanly', { error: error instanceof Error ? error.message : String(error) });
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
} catch (error) {
  logger.write('fatal', 'failed to start', { code: isCairnError(error) ? error.code : 'E_INTERNAL', error: error instanceof Error ? error.message : String(error) });
  process.exit(1);
}
