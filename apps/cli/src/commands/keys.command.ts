import { randomUUID } from 'node:crypto';
import { ApiKeyIdSchema, ApiKeyScopeSchema, API_KEY_SCOPES, TenantIdSchema } from '@cairn/contracts';
import type { ApiKeyScope, KeyCreated, KeyView } from '@cairn/contracts';
import type { Cairn } from '@cairn/sdk';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import type { Output } from '../output.js';
import { stackHome } from '../stack/stack-config.js';
import { writeApiKey } from '../stack/stack-file.js';
import { resolveTarget } from '../stack/stack-target.js';

/*
 * `cairn keys create|ls|rotate|revoke` and `cairn tenants create|ls` (docs/adr/0011): API keys and
 * tenants through the gateway, each act recorded on the tenant's admin chain. A new secret is
 * printed once, on stdout, and never again; rotating the key this CLI itself uses writes the new
 * one to $CAIRN_HOME/api-key (mode 0600, atomically), so later commands and `cairn up` keep working.
 */

const UNIT_SECONDS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };
const DURATION = /^([1-9][0-9]{0,6})([smhdw])$/;

/** `90s`, `15m`, `12h`, `30d`, `2w` → seconds; null when it is not a duration. */
export function parseDurationSeconds(text: string): number | null {
  const match = DURATION.exec(text.trim());
  if (match === null) return null;
  return Number(match[1]) * (UNIT_SECONDS[match[2] ?? 's'] ?? 1);
}

/** `--expires`: a duration from now (`30d`) or a date (`2027-01-01`, or RFC 3339), as the gateway's `expiresAt`. */
export function parseExpires(text: string, now: Date = new Date()): string {
  const seconds = parseDurationSeconds(text);
  const when = seconds !== null ? new Date(now.getTime() + seconds * 1000) : /^\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:\d{2})?)?$/.test(text.trim()) ? new Date(text.trim()) : null;
  if (when === null || Number.isNaN(when.getTime())) throw usageError(`--expires takes a duration (30d, 12h, 90m) or a date (2027-01-01), got ${JSON.stringify(text.slice(0, 60))}`);
  if (when.getTime() <= now.getTime()) throw usageError(`--expires ${text} is not in the future`);
  return when.toISOString();
}

export function parseScope(value: string, previous: ApiKeyScope[] = []): ApiKeyScope[] {
  const parsed = ApiKeyScopeSchema.safeParse(value);
  if (!parsed.success) throw usageError(`invalid scope ${JSON.stringify(value.slice(0, 40))}: one of ${API_KEY_SCOPES.join(', ')}`, { scope: value.slice(0, 40) });
  return previous.includes(parsed.data) ? previous : [...previous, parsed.data];
}

function parseTenant(value: string): string {
  const parsed = TenantIdSchema.safeParse(value);
  if (!parsed.success) throw usageError(`invalid tenant ${JSON.stringify(value.slice(0, 80))}: a tenant id is [a-z0-9_-], at most 64 characters, starting with a letter or digit`);
  return parsed.data;
}

function parseKeyId(value: string): string {
  const parsed = ApiKeyIdSchema.safeParse(value);
  if (!parsed.success) throw usageError(`invalid key id ${JSON.stringify(value.slice(0, 80))}: as \`cairn keys ls\` shows it`);
  return parsed.data;
}

/** The prefix of a key in the gateway's form, or null. */
function prefixOf(key: string): string | null {
  return /^cairn_([a-z2-7]{8})_/.exec(key)?.[1] ?? null;
}

function keyLine(key: KeyView): string {
  const expires = key.expiresAt === null ? 'never' : key.expiresAt;
  return `${key.id}  cairn_${key.prefix}_…${key.lastFour ?? '????'}  ${key.status.padEnd(7)}  ${key.scopes.join(',')}  expires ${expires}`;
}

/** The secret, once, on stdout; everything else a person reads goes beside it. */
function printSecret(output: Output, verb: string, created: KeyCreated, note: string | null): void {
  const { key, ...view } = created;
  const human = [`${output.okMark()}  key ${created.id} ${verb} (tenant ${created.tenant}, ${created.scopes.join(',')})`, key, ...(note === null ? [] : [note])].join('\n');
  output.result(human, { ok: true, ...view, key });
  if (!output.json) output.note('the key above is shown once: store it now (it is never shown again)');
}

/** Rotating the key this CLI uses: the new secret replaces it in $CAIRN_HOME/api-key, so the stack keeps working. */
async function keepOwnKey(context: CommandContext, apiKey: string, fromStackFile: boolean, rotated: KeyCreated): Promise<string | null> {
  if (prefixOf(apiKey) !== rotated.prefix) return null;
  if (!fromStackFile) return 'this was the key in CAIRN_API_KEY: set the new one there';
  const home = stackHome(context.env);
  await writeApiKey(home, rotated.key);
  return `the new key replaced the old one in ${home}/api-key`;
}

async function target(context: CommandContext): Promise<{ client: Cairn; apiKey: string; fromStackFile: boolean }> {
  const resolved = await resolveTarget(context.env);
  const explicit = context.env.CAIRN_API_KEY !== undefined && context.env.CAIRN_API_KEY !== '';
  return { client: resolved.client, apiKey: resolved.apiKey, fromStackFile: resolved.stack !== null && !explicit };
}

export function registerKeysCommand(program: Command, context: CommandContext): void {
  const keys = program
    .command('keys')
    .description("the tenant's API keys: create, list, rotate, revoke (each act recorded on the admin chain adm_<tenant>)")
    .addHelpText(
      'after',
      '\nNeeds an admin key. A tenant\'s admin keys administer that tenant; the operator (an admin key of tenant default,\n' +
        'e.g. the one `cairn up` made) also any other (--tenant). A new key is printed once and never shown again.\n' +
        `Scopes: ${API_KEY_SCOPES.join(', ')} (admin holds every scope).`,
    );

  keys
    .command('create')
    .description('create a key; its secret is printed once, on stdout')
    .option('--scope <scope>', 'a scope the key holds (repeat for more)', (value: string, previous: ApiKeyScope[] | undefined) => parseScope(value, previous))
    .option('--expires <duration|date>', 'when it stops working: 30d, 12h, 90m, or a date such as 2027-01-01 (default: never)')
    .option('--tenant <tenant>', "another tenant's key (the operator only)")
    .addHelpText('after', '\nExamples:\n  cairn keys create --scope runs:read --scope runs:write --expires 90d\n  cairn keys create --tenant acme --scope admin     # the operator: a new tenant\'s first admin key')
    .action(async (options: { scope?: ApiKeyScope[]; expires?: string; tenant?: string }, command: Command) => {
      const output = context.output(command);
      const scopes = options.scope ?? [];
      if (scopes.length === 0) throw usageError('name at least one --scope (runs:read, runs:write, approve, secrets:write, secrets:use, metrics:read, admin)');
      const body = {
        scopes,
        ...(options.expires === undefined ? {} : { expiresAt: parseExpires(options.expires) }),
        ...(options.tenant === undefined ? {} : { tenant: parseTenant(options.tenant) }),
      };
      const { client } = await target(context);
      // One Idempotency-Key per invocation: a request retried inside it names the same key.
      const idempotencyKey = `cli-${randomUUID()}`;
      const created = await client.keys.create(body, { idempotencyKey });
      printSecret(output, 'created', created, null);
    });

  keys
    .command('ls')
    .description("the tenant's keys: id, prefix and last four characters, status, scopes, expiry — never a secret")
    .option('--tenant <tenant>', "another tenant's keys (the operator only)")
    .action(async (options: { tenant?: string }, command: Command) => {
      const output = context.output(command);
      const tenant = options.tenant === undefined ? undefined : parseTenant(options.tenant);
      const { client } = await target(context);
      const listed = await client.keys.list(tenant === undefined ? {} : { tenant });
      output.result(listed.items.length === 0 ? 'no keys' : listed.items.map(keyLine).join('\n'), { ok: true, items: listed.items });
    });

  keys
    .command('rotate')
    .description('a new secret for the same key (same id, prefix, scopes, expiry), printed once; the old one stops working')
    .argument('<id>', 'the key id (cairn keys ls)')
    .option('--grace <duration>', 'keep the old secret working this long (at most 1h, e.g. 5m; default: it stops at once)')
    .addHelpText('after', '\nRotating the key this CLI uses ($CAIRN_HOME/api-key) writes the new key there (mode 0600, atomically).')
    .action(async (rawId: string, options: { grace?: string }, command: Command) => {
      const output = context.output(command);
      const id = parseKeyId(rawId);
      const graceSeconds = options.grace === undefined ? 0 : parseDurationSeconds(options.grace);
      if (graceSeconds === null || graceSeconds > 3600) throw usageError(`--grace takes a duration of at most 1h (90s, 5m), got ${JSON.stringify(options.grace)}`);
      const { client, apiKey, fromStackFile } = await target(context);
      const rotated = await client.keys.rotate(id, { graceSeconds });
      printSecret(output, `rotated (rotation ${rotated.rotations})`, rotated, await keepOwnKey(context, apiKey, fromStackFile, rotated));
    });

  keys
    .command('revoke')
    .description('revoke a key: it is refused from the very next request')
    .argument('<id>', 'the key id (cairn keys ls)')
    .option('--reason <text>', 'why (recorded on the admin chain)')
    .action(async (rawId: string, options: { reason?: string }, command: Command) => {
      const output = context.output(command);
      const id = parseKeyId(rawId);
      if (options.reason !== undefined && (options.reason.length === 0 || options.reason.length > 1024)) throw usageError('--reason takes 1 to 1024 characters');
      const { client } = await target(context);
      const revoked = await client.keys.revoke(id, options.reason === undefined ? {} : { reason: options.reason });
      output.result(`${output.okMark()}  key ${revoked.id} revoked (${revoked.revokedAt ?? '-'})`, { ok: true, ...revoked });
    });
}

export function registerTenantsCommand(program: Command, context: CommandContext): void {
  const tenants = program
    .command('tenants')
    .description("tenants (the operator's: an admin key of tenant default); each has an admin chain adm_<tenant>")
    .addHelpText('after', '\nThen `cairn keys create --tenant <id> --scope admin` mints the new tenant\'s first admin key.');

  tenants
    .command('create')
    .description('create a tenant')
    .argument('<id>', 'the tenant id, [a-z0-9_-], at most 64 characters')
    .action(async (rawId: string, _options: unknown, command: Command) => {
      const output = context.output(command);
      const id = parseTenant(rawId);
      const { client } = await target(context);
      const created = await client.tenants.create(id);
      output.result(`${output.okMark()}  tenant ${created.id} created (admin chain ${created.chainId})`, { ok: true, ...created });
    });

  tenants
    .command('ls')
    .description('every tenant')
    .action(async (_options: unknown, command: Command) => {
      const output = context.output(command);
      const { client } = await target(context);
      const listed = await client.tenants.list();
      const width = Math.max(6, ...listed.items.map((t) => t.id.length));
      const lines = [`${'TENANT'.padEnd(width)}  CREATED                   CHAIN`, ...listed.items.map((t) => `${t.id.padEnd(width)}  ${t.createdAt.padEnd(24)}  ${t.chainId}`)];
      output.result(lines.join('\n'), { ok: true, items: listed.items });
    });
}
