import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { exitOnSignals, exitOnStartFailure, JsonLogger } from '@cairn/service-kit';
import { GatewayConfigSchema } from './gateway.config.js';
import { GATEWAY_SERVICE, startGateway } from './start-gateway.js';

// Config fails at boot, naming the variable (never its value); SIGTERM/SIGINT close cleanly.
const logger = new JsonLogger(GATEWAY_SERVICE);
try {
  const gateway = await startGateway(loadConfig(GatewayConfigSchema), { logger });
  logger.write('info', 'listening', { url: gateway.url, pid: process.pid });
  exitOnSignals(logger, () => gateway.close());
} catch (error) {
  await exitOnStartFailure(logger, error);
}
