import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { ProjectorConfigSchema } from './projector.config.js';
import { startProjector } from './start-projector.js';

// Config fails at boot, naming the variable; a fatal projector error exits non-zero.
try {
  const projector = await startProjector(loadConfig(ProjectorConfigSchema), { shutdownHooks: true });
  await projector.done;
} catch (error) {
  process.stderr.write(`cairn-projector: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
