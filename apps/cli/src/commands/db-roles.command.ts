import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';

/** Roles, grants and two migration sets on a reachable server finish well inside this. */
const DATABASE_TIMEOUT_MS = 60_000;

export function registerDbRolesCommand(program: Command, context: CommandContext): void {
  program
    .command('db-roles')
    .description("make each service's PostgreSQL role, hand it its tables and run the shared migrations as their owners (what `cairn up` does; compose and Kubernetes run it once per start)")
    .argument('<dir>', "the roles' password files, as `cairn init-keys` makes them: <dir>/db-<service>/password")
    .addHelpText(
      'after',
      '\nAs the admin role of CAIRN_DATABASE_URL (it must own the database and have CREATEROLE): roles <database>_<service> for the\n' +
        'projector, intake, the gateway and webhooks, each with the password of its file; every table handed to its owner and granted\n' +
        'what docs/security.md says (ADR 0032). Idempotent. Exit status: 0 done, 1 failed (E_UNAVAILABLE when PostgreSQL cannot be\n' +
        'reached or refuses to make roles, E_INPUT for a missing or readable-by-others password file).',
    )
    .action(async (dir: string, _options: unknown, command: Command) => {
      const output = context.output(command);
      const { CONNECT_TIMEOUT_MS, databaseUrl, withPostgres } = await import('../connections.js');
      const { withStackDefaults } = await import('../stack/stack-target.js');
      const url = databaseUrl(await withStackDefaults(context.env));
      const { prepareStackDatabase } = await import('../stack/pg-roles.js');
      const root = resolve(dir);
      const prepared = await withPostgres(url, () => prepareStackDatabase(url, { fileOf: (service) => join(root, `db-${service}`, 'password'), create: false }), CONNECT_TIMEOUT_MS + DATABASE_TIMEOUT_MS);
      const roles = Object.values(prepared.roles.services).map((s) => s.role);
      output.result(
        `${output.okMark()}  roles ${roles.join(', ')}${prepared.transferred.length > 0 ? `; tables handed over: ${prepared.transferred.join(', ')}` : ''}; ${prepared.applied.length === 0 ? 'schema up to date' : `applied ${prepared.applied.join(', ')}`}`,
        { ok: true, roles, transferred: prepared.transferred, applied: prepared.applied, unknown: prepared.unknown },
      );
    });
}
