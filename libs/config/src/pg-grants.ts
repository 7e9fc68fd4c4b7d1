import { createHash } from 'node:crypto';

/*
 * Who may do what in a stack's PostgreSQL database, one row per table: the service whose role owns
 * it (and runs its migrations), the services whose roles may read it, and the one write a service
 * other than the owner still has. `cairn up` makes each service's role and applies exactly this
 * (apps/cli/src/stack/pg-roles.ts, docs/adr/0032); docs/security.md shows it (`pgGrantsMarkdown()`,
 * kept equal by a test); the per-role e2e checks every refusal against the server.
 */

/** Every process of a stack that connects to PostgreSQL; the others get no database URL at all. */
export const PG_SERVICES = ['projector', 'intake', 'gateway', 'webhooks'] as const;
export type PgService = (typeof PG_SERVICES)[number];

export function isPgService(name: string): name is PgService {
  return (PG_SERVICES as readonly string[]).includes(name);
}

/** A write a role may make to a table it does not own. */
export type PgWrite = 'INSERT' | 'UPDATE' | 'DELETE';

export interface PgTableGrant {
  /** Its role owns the table: every statement, and the migrations that make and change it. */
  owner: PgService;
  /** `SELECT` only. */
  reads: readonly PgService[];
  /** Writes a non-owner still makes (each one a follow-up to move behind the owner's command); none today. */
  writes?: Partial<Record<PgService, readonly PgWrite[]>>;
}

const PROJECTION = { owner: 'projector', reads: ['gateway'] } as const satisfies PgTableGrant;
const OWN = (owner: PgService): PgTableGrant => ({ owner, reads: [] });
const WEBHOOK_QUEUE = { owner: 'webhooks', reads: ['gateway'] } as const satisfies PgTableGrant;

/** The tables of a stack's database (public schema), by the migration set that makes them. */
export const PG_TABLES: { readonly [table: string]: PgTableGrant } = {
  // The projections (@cairn/persistence): written by the projector only, read by the gateway's views.
  evidence_events: PROJECTION,
  runs: PROJECTION,
  sandboxes: PROJECTION,
  poison_events: PROJECTION,
  projection_positions: PROJECTION,
  cairn_migrations: OWN('projector'),
  // Intake's idempotency keys (apps/intake/src/migrations).
  intake_idempotency: OWN('intake'),
  intake_migrations: OWN('intake'),
  // The gateway's keys and tenants; the legacy secrets table it empties into the catalog (ADR 0028).
  api_keys: OWN('gateway'),
  tenants: OWN('gateway'),
  gateway_migrations: OWN('gateway'),
  secrets: OWN('gateway'),
  secret_grants: OWN('gateway'),
  secret_store_migrations: OWN('gateway'),
  // The webhooks service's registrations and delivery queue (@cairn/webhooks). The gateway reads them;
  // registering, deleting and replaying are commands the webhooks service serves (ADR 0027).
  webhooks: WEBHOOK_QUEUE,
  // The ids of deleted webhooks: a deletion or registration delivered twice is done once.
  webhook_deletions: OWN('webhooks'),
  webhook_deliveries: WEBHOOK_QUEUE,
  webhook_delivery_attempts: WEBHOOK_QUEUE,
  // Read by the gateway's store when it opens (its migrations are the webhooks service's, run first by `cairn up`).
  webhook_store_migrations: WEBHOOK_QUEUE,
};

/** Functions the migrations make (public schema), with their owner: the evidence table's append-only trigger. */
export const PG_FUNCTIONS: { readonly [fn: string]: PgService } = {
  cairn_evidence_events_append_only: 'projector',
};

/** The tables `service` may write (its own and the writes granted it), for the refusal tests and the docs. */
export function pgWritesOf(service: PgService): string[] {
  return Object.entries(PG_TABLES)
    .filter(([, grant]) => grant.owner === service || (grant.writes?.[service]?.length ?? 0) > 0)
    .map(([table]) => table);
}

/** The tables `service` may read (owned, read or written). */
export function pgReadsOf(service: PgService): string[] {
  return Object.entries(PG_TABLES)
    .filter(([, grant]) => grant.owner === service || grant.reads.includes(service))
    .map(([table]) => table);
}

/**
 * The role of `service` in `database`: `<database>_<service>`. Roles are the server's, not the
 * database's, so the name carries the database: two stacks on one server (one database each) never
 * share a role. A name past PostgreSQL's 63 bytes keeps its head, a hash of the database and the service.
 */
export function pgRoleName(database: string, service: PgService): string {
  const name = `${database}_${service}`;
  if (name.length <= 63) return name;
  const hash = createHash('sha256').update(database).digest('hex').slice(0, 10);
  return `${database.slice(0, 63 - service.length - hash.length - 2)}_${hash}_${service}`;
}

/** PG_TABLES as the markdown table docs/security.md shows (a unit test keeps the two equal). */
export function pgGrantsMarkdown(): string {
  const rows = PG_SERVICES.map((service) => {
    const owns = Object.entries(PG_TABLES)
      .filter(([, grant]) => grant.owner === service)
      .map(([table]) => `\`${table}\``);
    const functions = Object.entries(PG_FUNCTIONS)
      .filter(([, owner]) => owner === service)
      .map(([fn]) => `\`${fn}()\``);
    const reads = Object.entries(PG_TABLES)
      .filter(([, grant]) => grant.reads.includes(service))
      .map(([table]) => `\`${table}\``);
    const writes = Object.entries(PG_TABLES).flatMap(([table, grant]) => {
      const granted = grant.writes?.[service];
      return granted === undefined || granted.length === 0 ? [] : [`\`${table}\` (${granted.join(', ')})`];
    });
    return `| ${service} | \`<database>_${service}\` | ${[...owns, ...functions].join(', ') || '—'} | ${reads.join(', ') || '—'} | ${writes.join(', ') || '—'} |`;
  });
  return ['| service | role | owns (every statement; runs their migrations) | reads (`SELECT`) | writes to a table it does not own |', '|---|---|---|---|---|', ...rows].join('\n');
}
