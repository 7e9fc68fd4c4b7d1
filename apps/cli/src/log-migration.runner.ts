import { EvidenceLogConfigSchema, loadConfig } from '@cairn/config';
import { connectNats, evidenceLogOptionsFromConfig, migrateEvidenceLog } from '@cairn/evidence-log';
import type { MigrationResult } from '@cairn/evidence-log';
import { CONNECT_TIMEOUT_MS, credsOf } from './connections.js';

/** `cairn log migrate` against the stack `env` names; the projector's durable is left to the projector (it starts over and skips what it has). */
export async function runLogMigration(env: NodeJS.ProcessEnv, progress: (line: string) => void): Promise<MigrationResult> {
  const config = loadConfig(EvidenceLogConfigSchema, env);
  const nc = await connectNats({ servers: config.CAIRN_NATS_URL, name: 'cairn-cli', timeout: CONNECT_TIMEOUT_MS, maxReconnectAttempts: 0, ...credsOf(config) });
  try {
    return await migrateEvidenceLog(nc, { ...evidenceLogOptionsFromConfig(config), leaveDurables: [env.CAIRN_PROJECTOR_DURABLE ?? 'cairn-projector'], progress });
  } finally {
    await nc.close();
  }
}
