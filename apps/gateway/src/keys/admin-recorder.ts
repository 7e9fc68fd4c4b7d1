import { isCairnError } from '@cairn/contracts';
import { JsonLogger, PeriodicTask } from '@cairn/service-kit';
import { Injectable } from '@nestjs/common';
import type { OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { BOOTSTRAP_ACTOR } from '../auth/api-key.store.js';
import { KeyAdminRepository } from './key-admin.repository.js';
import { KeyAdministration } from './key-admin.service.js';

const PASS_INTERVAL_MS = 5_000;
const BATCH = 50;
/** A pass waits this long for intake per act: it runs again soon, and must not hold a stopping gateway up. */
const RECORD_TIMEOUT_MS = 2_000;

/**
 * Records what the key table holds and the admin chains do not yet (docs/adr/0011): tenants that
 * predate their chain, the bootstrap key's creation (CAIRN_API_KEY, stored at start before intake
 * may be up), and revocations whose receipt failed after the row was refused. Each recording is
 * idempotent, so passes on several gateways, or after a crash, store nothing twice.
 */
@Injectable()
export class AdminRecorder implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly task: PeriodicTask;
  private first: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly repository: KeyAdminRepository,
    private readonly keys: KeyAdministration,
    private readonly logger: JsonLogger,
  ) {
    this.task = new PeriodicTask(PASS_INTERVAL_MS, () => this.pass(), (error) => this.logger.write('warn', 'admin recording pass failed', { error: String(error) }));
  }

  onApplicationBootstrap(): void {
    this.first = this.pass()
      .catch((error: unknown) => this.logger.write('warn', 'admin recording pass failed', { error: String(error) }))
      .finally(() => this.task.start());
  }

  async onApplicationShutdown(): Promise<void> {
    await this.task.stop();
    await this.first;
    await this.task.stop();
  }

  /** One pass; what fails (intake not up yet, say) is tried again at the next. Resolves to what it recorded. */
  async pass(): Promise<number> {
    let recorded = 0;
    const attempt = async (what: string, work: () => Promise<void>) => {
      if (this.task.stopped) return;
      try {
        await work();
        recorded += 1;
        this.logger.write('info', 'admin act recorded', { what });
      } catch (error) {
        this.logger.write('warn', 'admin act not recorded yet', { what, code: isCairnError(error) ? error.code : 'E_INTERNAL', error: error instanceof Error ? error.message : String(error) });
      }
    };
    for (const tenant of await this.repository.unrecordedTenants(BATCH)) await attempt(`tenant ${tenant.id}`, () => this.keys.recordTenant(tenant, RECORD_TIMEOUT_MS));
    for (const row of await this.repository.unrecordedKeys(BATCH)) {
      if (row.unrecorded === 'created') {
        await attempt(`key ${row.id} created`, async () => {
          await this.keys.recordCreation(row, RECORD_TIMEOUT_MS);
          await this.repository.markRecorded(row.id, 'created');
        });
      } else if (row.unrecorded === 'revoked') {
        await attempt(`key ${row.id} revoked`, () => this.keys.recordRevocation(row, row.revoked_by ?? BOOTSTRAP_ACTOR, undefined, RECORD_TIMEOUT_MS));
      }
    }
    return recorded;
  }
}
