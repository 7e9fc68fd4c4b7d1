import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { isCairnError } from '@cairn/contracts';
import { exitOnSignals, exitOnStartFailure, JsonLogger } from '@cairn/service-kit';
import { exitWithTraces } from '@cairn/tracing';
import { ProjectorConfigSchema } from './projector.config.js';
import { startProjector } from './start-projector.js';

// Config fails at boot, naming the variable; SIGTERM/SIGINT drain and exit 0 as every service does
// (`exitOnSignals`: the traces are flushed first, ADR 0031); a fatal projector error exits 1, flushed too.
const logger = new JsonLogger('projector');
const projector = await Promise.resolve()
  .then(() => startProjector(loadConfig(ProjectorConfigSchema)))
  .catch((error: unknown) => exitOnStartFailure(logger, error));
exitOnSignals(logger, () => projector.stop());
try {
  await projector.done;
} catch (error) {
  logger.write('fatal', 'stopped on a fatal error', { code: isCairnError(error) ? error.code : 'E_INTERNAL', error: error instanceof Error ? error.message : String(error) });
  await exitWithTraces(1);
}
