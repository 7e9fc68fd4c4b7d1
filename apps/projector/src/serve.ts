import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { exitOnSignals, JsonLogger } from '@cairn/service-kit';
import { exitWithTraces } from '@cairn/tracing';
import { ProjectorConfigSchema } from './projector.config.js';
import { startProjector } from './start-projector.js';

// Config fails at boot, naming the variable; SIGTERM/SIGINT drain and exit 0 as every service does
// (`exitOnSignals`: the traces are flushed first, ADR 0031); a fatal projector error exits 1, flushed too.
const logger = new JsonLogger('projector');
try {
  const projector = await startProjector(loadConfig(ProjectorConfigSchema));
  exitOnSignals(logger, () => projector.stop());
  await projector.done;
} catch (error) {
  logger.write('fatal', 'stopped on a fatal error', { error: error instanceof Error ? error.message : String(error) });
  await exitWithTraces(1);
}
