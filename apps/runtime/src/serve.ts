import 'reflect-metadata';
import { JsonLogger, runServiceMain } from '@cairn/service-kit';
import { hostname } from 'node:os';
import { loadRuntimeConfig, workerStateDir } from './runtime.config.js';
import { RUNTIME_SERVICE, runtimeModule } from './runtime.module.js';
import { claimWorkerIdentity } from './worker-identity.js';

await runServiceMain(RUNTIME_SERVICE, async () => {
  const settings = loadRuntimeConfig();
  // Before anything touches the engine or the broker: a second runtime on this state directory stops here.
  const identity = await claimWorkerIdentity({ stateDir: workerStateDir(settings), configuredId: settings.CAIRN_WORKER_ID, hostname: hostname() });
  new JsonLogger(RUNTIME_SERVICE).write('info', 'worker identity', { worker_id: identity.workerId, state_dir: identity.stateDir, created: identity.created });
  return runtimeModule({ ...settings, CAIRN_WORKER_ID: identity.workerId, CAIRN_WORKER_STATE_DIR: identity.stateDir });
});
