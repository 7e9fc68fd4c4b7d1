import { importArtifactDir, NatsArtifactStore } from '@cairn/artifact-store';
import { FROZEN_CAPS } from '@cairn/contracts';
import { LeaseStore, WorkerRegistry } from '@cairn/operational';
import { NATS_CONNECTION, SERVICE_LOGGER, ServiceRuntimeModule } from '@cairn/service-kit';
import type { JsonLogger } from '@cairn/service-kit';
import type { NatsConnection } from '@nats-io/transport-node';
import type { DynamicModule } from '@nestjs/common';
import { RuntimeHandler } from './runtime.handler.js';
import { SecretValuesReader } from '@cairn/secret-store';
import { workerSlots } from './runtime.config.js';
import type { RuntimeConfig } from './runtime.config.js';
import { ARTIFACT_STORE, LEASE_STORE, RUNTIME_SECRETS, SANDBOX_ENGINE, WORKER_REGISTRY } from './runtime.tokens.js';
import { RuntimeWorker } from './runtime-worker.service.js';
import { SandboxEngine } from './sandbox-engine.adapter.js';
import { ImageBuildHost } from './image-build.host.js';
import { SandboxSessionHost } from './sandbox-session.host.js';
import { runtimeDurableName } from './worker-id.js';

export const RUNTIME_SERVICE = 'runtime';

/** Every step of the longest RunSpec at the frozen wall cap, plus an hour for files and teardown. */
const RUN_HANDLER_TIMEOUT_MS = (64 * FROZEN_CAPS.wallSeconds + 3600) * 1000;

/**
 * The runtime worker: one per sandbox host. Its reactor takes `run.scheduled` for this worker, at
 * most its slots at once (I-9); its durable consumer is its own (`cairn-runtime-<worker>`).
 */
export function runtimeModule(config: RuntimeConfig): DynamicModule {
  return ServiceRuntimeModule.forRoot({
    service: RUNTIME_SERVICE,
    config,
    handler: RuntimeHandler,
    durable: runtimeDurableName(config.CAIRN_WORKER_ID),
    concurrency: workerSlots(config),
    // A run may hold its placement for every step's wall cap, and for its steps held for approval;
    // liveness is the lease's job here.
    handlerTimeoutMs: RUN_HANDLER_TIMEOUT_MS + config.CAIRN_STEP_HOLD_MAX_SECONDS * 1000,
    providers: [
      { provide: SANDBOX_ENGINE, inject: [SERVICE_LOGGER], useFactory: (logger: JsonLogger) =>
          new SandboxEngine({
            onWarmFailed: (error) => logger.write('warn', 'a warm sandbox could not be made', { error: error instanceof Error ? error.message : String(error) }),
            onRemovalFailed: (containerId, error, retrying) =>
              logger.write(retrying ? 'warn' : 'error', retrying ? 'a sandbox removal failed: tried again until it is gone' : 'a sandbox is still there after every removal try: the next start reaps it', {
                container_id: containerId,
                error: error instanceof Error ? error.message : String(error),
              }),
            socketPath: config.CAIRN_DOCKER_SOCKET,
            probes: config.CAIRN_SANDBOX_PROBES,
            warmPool: { perProfile: config.CAIRN_WARM_POOL_SIZE, total: config.CAIRN_WARM_POOL_TOTAL },
            egressHosts: config.CAIRN_EGRESS_HOSTS,
            user: config.CAIRN_SANDBOX_USER,
            requireUserns: config.CAIRN_SANDBOX_REQUIRE_USERNS,
            agent: { binary: config.CAIRN_AGENT_BINARY, socketRoot: config.CAIRN_AGENT_SOCKET_ROOT },
          }),
      },
      {
        provide: ARTIFACT_STORE,
        inject: [NATS_CONNECTION, SERVICE_LOGGER],
        useFactory: (nc: NatsConnection, logger: JsonLogger) => openArtifactStore(nc, config, logger),
      },
      // The private key file is read and checked at boot: one that others may read stops the worker here.
      {
        provide: RUNTIME_SECRETS,
        inject: [NATS_CONNECTION],
        useFactory: (nc: NatsConnection) =>
          SecretValuesReader.fromKeyFile(config.CAIRN_SECRETS_PRIVATE_KEY_FILE, { bucket: config.CAIRN_SECRETS_BUCKET, replicas: config.CAIRN_NATS_REPLICAS, nc: () => nc }),
      },
      {
        provide: LEASE_STORE,
        inject: [NATS_CONNECTION],
        useFactory: (nc: NatsConnection) => LeaseStore.open(nc, { bucket: config.CAIRN_LEASES_BUCKET, replicas: config.CAIRN_NATS_REPLICAS }),
      },
      {
        provide: WORKER_REGISTRY,
        inject: [NATS_CONNECTION],
        useFactory: (nc: NatsConnection) => WorkerRegistry.open(nc, { bucket: config.CAIRN_WORKERS_BUCKET, replicas: config.CAIRN_NATS_REPLICAS }),
      },
      RuntimeWorker,
      SandboxSessionHost,
      ImageBuildHost,
    ],
    exports: [RuntimeWorker, SandboxSessionHost],
  });
}

/**
 * The object store this worker writes artifacts to (docs/adr/0021), created when absent. The empty
 * artifact is stored at boot, so a step cut short still has the record it names even once the store
 * is full; an older stack's artifact directory is uploaded once.
 */
async function openArtifactStore(nc: NatsConnection, config: RuntimeConfig, logger: JsonLogger): Promise<NatsArtifactStore> {
  const store = await NatsArtifactStore.open(nc, { bucket: config.CAIRN_ARTIFACT_BUCKET, create: { replicas: config.CAIRN_NATS_REPLICAS, maxBytes: config.CAIRN_ARTIFACT_STORE_MAX_BYTES } });
  await store.put(new Uint8Array(0));
  const imported = await importArtifactDir(config.CAIRN_ARTIFACT_DIR, store);
  if (imported !== null) {
    logger.write(imported.corrupt.length > 0 ? 'error' : 'info', 'an artifact directory of an older stack was uploaded to the object store', {
      dir: config.CAIRN_ARTIFACT_DIR,
      bucket: store.bucket,
      imported: imported.imported,
      present: imported.present,
      corrupt: imported.corrupt,
      skipped: imported.skipped,
    });
  }
  logger.write('info', 'writing artifacts', { bucket: store.bucket, max_bytes: config.CAIRN_ARTIFACT_STORE_MAX_BYTES, replicas: config.CAIRN_NATS_REPLICAS });
  return store;
}
