import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PG_FUNCTIONS, PG_SERVICES, PG_TABLES, pgGrantsMarkdown, pgReadsOf, pgRoleName, pgWritesOf } from './pg-grants.js';

describe('PG_TABLES', () => {
  it('gives every table one owner among the services, and readers that are services other than it', () => {
    for (const [table, grant] of Object.entries(PG_TABLES)) {
      expect(PG_SERVICES, table).toContain(grant.owner);
      for (const reader of grant.reads) {
        expect(PG_SERVICES, table).toContain(reader);
        expect(reader, `${table}: its owner reads it anyway`).not.toBe(grant.owner);
      }
    }
    for (const owner of Object.values(PG_FUNCTIONS)) expect(PG_SERVICES).toContain(owner);
  });

  it('lets no service write what another owns: webhook registrations and deletions are the webhooks service\'s, by command (ADR 0027)', () => {
    const foreign = Object.entries(PG_TABLES).flatMap(([table, grant]) => Object.entries(grant.writes ?? {}).map(([service, writes]) => `${service}:${table}:${(writes ?? []).join(',')}`));
    expect(foreign).toEqual([]);
    expect(pgWritesOf('gateway').filter((table) => table.startsWith('webhook'))).toEqual([]);
    expect(pgReadsOf('gateway')).toEqual(expect.arrayContaining(['webhooks', 'webhook_deliveries', 'webhook_delivery_attempts', 'webhook_store_migrations']));
    expect(pgReadsOf('gateway')).not.toContain('webhook_deletions');
    expect(pgWritesOf('webhooks')).toEqual(['webhooks', 'webhook_deletions', 'webhook_deliveries', 'webhook_delivery_attempts', 'webhook_store_migrations']);
  });

  it('keeps each service to its own tables: the projector writes projections only, intake its keys only, the gateway reads projections', () => {
    expect(pgWritesOf('projector')).toEqual(['evidence_events', 'runs', 'sandboxes', 'poison_events', 'projection_positions', 'cairn_migrations']);
    expect(pgWritesOf('intake')).toEqual(['intake_idempotency', 'intake_migrations']);
    expect(pgReadsOf('intake')).toEqual(['intake_idempotency', 'intake_migrations']);
    expect(pgWritesOf('gateway')).not.toContain('runs');
    expect(pgReadsOf('gateway')).toEqual(expect.arrayContaining(['runs', 'evidence_events', 'sandboxes', 'webhook_deliveries']));
    expect(pgReadsOf('projector')).not.toContain('intake_idempotency');
    expect(pgReadsOf('webhooks')).not.toContain('runs');
  });
});

describe('pgRoleName', () => {
  it('names a role for its database and service', () => {
    expect(pgRoleName('cairn', 'projector')).toBe('cairn_projector');
  });

  it('keeps a long name within 63 bytes, unique per database, ending in the service', () => {
    const long = `cairn_${'x'.repeat(60)}`;
    const a = pgRoleName(long, 'webhooks');
    const b = pgRoleName(`${long}y`, 'webhooks');
    expect(a.length).toBeLessThanOrEqual(63);
    expect(a.endsWith('_webhooks')).toBe(true);
    expect(a).not.toBe(b);
    expect(pgRoleName(long, 'gateway')).not.toBe(a);
  });
});

describe('pgGrantsMarkdown', () => {
  it('is the table docs/security.md shows', async () => {
    const doc = await readFile(fileURLToPath(new URL('../../../docs/security.md', import.meta.url)), 'utf8');
    const start = doc.indexOf('<!-- pg-grants:start -->');
    const end = doc.indexOf('<!-- pg-grants:end -->');
    expect(start, 'docs/security.md has the markers').toBeGreaterThan(0);
    expect(doc.slice(start + '<!-- pg-grants:start -->'.length, end).trim()).toBe(pgGrantsMarkdown());
  });
});
