import { redactUrl, tlogNames } from '@cairn/config';
import type { EvidenceLog } from '@cairn/evidence-log';
import { readSealKeyFile } from '@cairn/secret-store';
import { ArtifactLoader, EVIDENCE_LOG, JsonLogger, NATS_CONNECTION, RunScanners, SERVICE_LOGGER, ServiceRuntimeModule } from '@cairn/service-kit';
import { TransparencyLog } from '@cairn/tlog';
import { describeKey } from '@cairn/transparency';
import type { NoteSigner } from '@cairn/transparency';
import type { NatsConnection } from '@nats-io/transport-node';
import { Inject, Injectable } from '@nestjs/common';
import type { DynamicModule, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { GraderConfig } from './grader.config.js';
import { GradingHandler } from './grading.handler.js';
import { JUDGE_CLIENT, judgeClientOf } from './judge-client.js';
import { SEAL_LOG, SealLog } from './seal-log.js';
import { SEAL_SIGNER } from './seal-signing.js';

/** Starts the log's checkpoints and its catch-up once the grader is up; stops them first on shutdown. */
@Injectable()
class SealLogLifecycle implements OnApplicationBootstrap, OnApplicationShutdown {
  private catchUp: Promise<void> | null = null;

  constructor(
    @Inject(SEAL_LOG) private readonly sealLog: SealLog | null,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(EVIDENCE_LOG) private readonly evidence: EvidenceLog,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {}

  onApplicationBootstrap(): void {
    const sealLog = this.sealLog;
    if (sealLog === null) return;
    sealLog.start();
    // In the background: a large log must not hold the grader's start; a failure is logged, and the next boot tries again.
    this.catchUp = sealLog
      .catchUp(this.nc, this.evidence)
      .then((appended) => {
        if (appended > 0) this.logger.write('info', 'seals from before the log appended to it', { appended });
      })
      .catch((error: unknown) => this.logger.write('error', 'could not catch the log of seal heads up', { error: String(error) }));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.catchUp;
    await this.sealLog?.stop();
  }
}

export const GRADER_SERVICE = 'grader';

/** The grader service: grades verified runs and seals every run that is over. */
export function graderModule(config: GraderConfig): DynamicModule {
  return ServiceRuntimeModule.forRoot({
    service: GRADER_SERVICE,
    config,
    handler: GradingHandler,
    ackWaitMs: config.CAIRN_GRADER_ACK_WAIT_MS,
    providers: [
      ArtifactLoader.provider(config),
      RunScanners.provider(config),
      {
        provide: SEAL_SIGNER,
        // Read once at boot: a key file others may read, or that holds no key, stops the grader.
        useFactory: async () => {
          const logger = new JsonLogger(GRADER_SERVICE);
          if (config.CAIRN_SEAL_KEY_FILE === undefined) {
            logger.write('warn', 'no seal key file (CAIRN_SEAL_KEY_FILE): seals are appended unsigned');
            return null;
          }
          const signer = await readSealKeyFile(config.CAIRN_SEAL_KEY_FILE);
          logger.write('info', 'signing seals', { key: describeKey(signer), key_file: config.CAIRN_SEAL_KEY_FILE });
          return signer;
        },
      },
      {
        provide: SEAL_LOG,
        inject: [SEAL_SIGNER, NATS_CONNECTION],
        // Kept by the grader that holds the key: without a key there are no checkpoints, so no log.
        useFactory: async (signer: NoteSigner | null, nc: NatsConnection) => {
          if (signer === null) return null;
          const names = tlogNames(config);
          const log = await TransparencyLog.open(nc, { ...names, replicas: config.CAIRN_NATS_REPLICAS }, 'writer');
          new JsonLogger(GRADER_SERVICE).write('info', 'keeping the log of seal heads', { stream: names.stream, checkpoints: names.checkpointBucket });
          return new SealLog(log, signer, new JsonLogger(GRADER_SERVICE), config.CAIRN_TLOG_CHECKPOINT_INTERVAL_MS);
        },
      },
      {
        provide: JUDGE_CLIENT,
        // Read once at boot: a key file others may read, or that holds no key, stops the grader.
        useFactory: async () => {
          const judge = await judgeClientOf(config);
          const logger = new JsonLogger(GRADER_SERVICE);
          if (judge === null) logger.write('info', 'no judge configured (CAIRN_JUDGE_URL): judge criteria fail their grade as unconfigured');
          else logger.write('info', 'judging with the configured model', { model: judge.model, endpoint: redactUrl(config.CAIRN_JUDGE_URL ?? '') });
          return judge;
        },
      },
      SealLogLifecycle,
    ],
  });
}
