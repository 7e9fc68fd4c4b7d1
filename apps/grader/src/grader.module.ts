import { readSealKeyFile } from '@cairn/secret-store';
import { ArtifactLoader, JsonLogger, RunScanners, ServiceRuntimeModule } from '@cairn/service-kit';
import { describeKey } from '@cairn/transparency';
import type { DynamicModule } from '@nestjs/common';
import type { GraderConfig } from './grader.config.js';
import { GradingHandler } from './grading.handler.js';
import { SEAL_SIGNER } from './seal-signing.js';

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
      RunScanners.provider(config, 'cairn-grader-secrets'),
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
    ],
  });
}
