import { createHash, createHmac, pbkdf2Sync } from 'node:crypto';
import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { databaseOf, scramVerifier, serviceDatabaseEnv, serviceDatabaseUrl, tableGrantStatements } from './pg-roles.js';

const roles = { projector: 'db_projector', intake: 'db_intake', gateway: 'db_gateway', webhooks: 'db_webhooks' };

describe('tableGrantStatements', () => {
  it('hands a table to its owner, revokes everyone else and grants its readers SELECT', () => {
    expect(tableGrantStatements('runs', 'cairn', roles)).toEqual([
      'ALTER TABLE public."runs" OWNER TO "db_projector"',
      'REVOKE ALL ON TABLE public."runs" FROM PUBLIC, "db_intake", "db_gateway", "db_webhooks"',
      'GRANT SELECT ON TABLE public."runs" TO "db_gateway"',
    ]);
  });

  it('leaves the owner as it is when it is right; the gateway keeps only SELECT on webhooks (its old INSERT, DELETE revoked on an upgraded stack)', () => {
    expect(tableGrantStatements('webhooks', 'db_webhooks', roles)).toEqual([
      'REVOKE ALL ON TABLE public."webhooks" FROM PUBLIC, "db_projector", "db_intake", "db_gateway"',
      'GRANT SELECT ON TABLE public."webhooks" TO "db_gateway"',
    ]);
    expect(tableGrantStatements('webhook_deletions', 'cairn', roles)).toEqual([
      'ALTER TABLE public."webhook_deletions" OWNER TO "db_webhooks"',
      'REVOKE ALL ON TABLE public."webhook_deletions" FROM PUBLIC, "db_projector", "db_intake", "db_gateway"',
    ]);
  });

  it('says nothing of a table PG_TABLES does not name', () => {
    expect(tableGrantStatements('someone_elses', 'cairn', roles)).toEqual([]);
  });
});

describe('the URLs a service is handed', () => {
  it('keeps host, port, database and options; the role is the service’s; no password', () => {
    const url = new URL(serviceDatabaseUrl('postgres://cairn:cairn@127.0.0.1:5432/cairn_t1?sslmode=disable', 'gateway'));
    expect(url.username).toBe('cairn_t1_gateway');
    expect(url.password).toBe('');
    expect(url.host).toBe('127.0.0.1:5432');
    expect(url.pathname).toBe('/cairn_t1');
    expect(url.searchParams.get('sslmode')).toBe('disable');
  });

  it('refuses a URL whose database cannot name roles', () => {
    for (const url of ['postgres://cairn@h/', 'postgres://cairn@h/a%22b']) {
      try {
        databaseOf(url);
        throw new Error('accepted');
      } catch (error) {
        expect(isCairnError(error) && error.code).toBe('E_INPUT');
      }
    }
  });

  it('gives a stack with roles its URL and password file per service, none to the others; an older stack keeps its URL', () => {
    const config = { CAIRN_DATABASE_URL: 'postgres://cairn:cairn@h:5432/cairn', CAIRN_DATABASE_ROLES_DIR: '/home/s/pg' };
    expect(serviceDatabaseEnv(config, 'intake')).toEqual({ CAIRN_DATABASE_URL: 'postgres://cairn_intake@h:5432/cairn', CAIRN_DATABASE_PASSWORD_FILE: '/home/s/pg/intake.password' });
    expect(serviceDatabaseEnv(config, 'runtime')).toEqual({});
    expect(serviceDatabaseEnv({ CAIRN_DATABASE_URL: config.CAIRN_DATABASE_URL }, 'intake')).toBeNull();
  });
});

describe('scramVerifier', () => {
  it('stores what a SCRAM-SHA-256 client proves against (RFC 5802: StoredKey = H(HMAC(SaltedPassword, "Client Key")))', () => {
    const salt = Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64');
    const verifier = scramVerifier('pencil', salt, 4096);
    const [head, keys] = verifier.split('$').slice(1);
    expect(verifier.startsWith('SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$')).toBe(true);
    expect(head).toBe('4096:W22ZaJ0SNY7soEsUEjb6gQ==');
    const salted = pbkdf2Sync('pencil', salt, 4096, 32, 'sha256');
    const stored = createHash('sha256').update(createHmac('sha256', salted).update('Client Key').digest()).digest('base64');
    const server = createHmac('sha256', salted).update('Server Key').digest('base64');
    expect(keys).toBe(`${stored}:${server}`);
    // A known answer: the ServerKey of "pencil" with RFC 7677's salt and 4096 iterations.
    expect(server).toBe('wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=');
  });

  it('salts anew each time: the same password, another verifier', () => {
    expect(scramVerifier('same')).not.toBe(scramVerifier('same'));
  });
});
