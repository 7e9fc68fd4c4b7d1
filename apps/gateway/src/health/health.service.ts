import { HEALTH_SERVICES } from '@cairn/contracts';
import type { Health, HealthService as ServiceName } from '@cairn/contracts';
import { CommandBus } from '@cairn/operational';
import { jetstreamManager } from '@nats-io/jetstream';
import type { ConsumerInfo } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG, GATEWAY_NATS } from '../gateway.tokens.js';

/** A check that has not answered by then is down: health must answer even when a dependency hangs. */
const CHECK_TIMEOUT_MS = 2000;

async function within<T>(work: Promise<T>, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), CHECK_TIMEOUT_MS);
  });
  try {
    return await Promise.race([work.catch(() => fallback), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A consumer named for the service (`cairn-<service>` or `cairn-<service>-…`) that has a pull waiting. */
export function servicePulling(service: ServiceName, consumers: readonly Pick<ConsumerInfo, 'name' | 'num_waiting'>[]): boolean {
  return consumers.some((c) => (c.name === `cairn-${service}` || c.name.startsWith(`cairn-${service}-`)) && c.num_waiting > 0);
}

/**
 * Is Cairn up: NATS (JetStream answers), PostgreSQL (the projections are there), and each
 * service (a durable consumer of its name is pulling: intake on the command stream, the others
 * on the evidence stream).
 */
@Injectable()
export class HealthService {
  constructor(
    @Inject(GATEWAY_NATS) private readonly nc: NatsConnection,
    private readonly dataSource: DataSource,
    private readonly bus: CommandBus,
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
  ) {}

  async check(): Promise<Health> {
    const [nats, postgres, consumers] = await Promise.all([
      within(this.natsUp(), false),
      within(this.postgresUp(), false),
      within(this.consumers(), { commands: [], evidence: [] }),
    ]);
    const services = {} as Record<ServiceName, 'ok' | 'missing'>;
    for (const service of HEALTH_SERVICES) {
      const pool = service === 'intake' ? consumers.commands : consumers.evidence;
      services[service] = servicePulling(service, pool) ? 'ok' : 'missing';
    }
    const healthy = nats && postgres && Object.values(services).every((s) => s === 'ok');
    return { status: healthy ? 'ok' : 'degraded', checks: { nats: nats ? 'ok' : 'down', postgres: postgres ? 'ok' : 'down', services } };
  }

  private async natsUp(): Promise<boolean> {
    if (this.nc.isClosed()) return false;
    await (await jetstreamManager(this.nc)).getAccountInfo();
    return true;
  }

  private async postgresUp(): Promise<boolean> {
    const rows = await this.dataSource.query<{ ok: boolean }[]>(`SELECT to_regclass('runs') IS NOT NULL AND to_regclass('evidence_events') IS NOT NULL AS ok`);
    return rows[0]?.ok === true;
  }

  private async consumers(): Promise<{ commands: ConsumerInfo[]; evidence: ConsumerInfo[] }> {
    const jsm = await jetstreamManager(this.nc);
    const list = async (stream: string): Promise<ConsumerInfo[]> => {
      const found: ConsumerInfo[] = [];
      try {
        for await (const info of jsm.consumers.list(stream)) found.push(info);
      } catch {
        // No such stream yet: no consumers.
      }
      return found;
    };
    const [commands, evidence] = await Promise.all([list(this.bus.streamName), list(this.config.CAIRN_EVIDENCE_STREAM)]);
    return { commands, evidence };
  }
}
