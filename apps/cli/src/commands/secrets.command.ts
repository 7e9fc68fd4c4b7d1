import { SecretGranteeSchema, SecretNameSchema } from '@cairn/contracts';
import { withoutTrailingNewline } from '@cairn/secrets';
import type { Cairn } from '@cairn/sdk';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import { resolveTarget } from '../stack/stack-target.js';

/*
 * `cairn secrets set|ls|rm|grant|revoke`: the tenant's secret store through the gateway,
 * write-only, and who may use each secret. A value is read from stdin — never from argv, where `ps`
 * and shell history would keep it — and is never printed back: a listing shows its last four
 * characters, who set it and its grants.
 */

/** What a value may be at most as read (the gateway refuses more than 32 KiB; this only bounds memory). */
const MAX_STDIN_BYTES = 1024 * 1024;

/** A grantee as `--grant` and `grant`/`revoke` take it: `key:<key id>` or `scope:<scope>`. */
export function parseGrantee(value: string): string {
  if (!SecretGranteeSchema.safeParse(value).success) {
    throw usageError(`invalid grantee ${JSON.stringify(value.slice(0, 80))}: key:<key id> (one API key) or scope:<scope> (every key of the tenant holding it)`, { grantee: value.slice(0, 80) });
  }
  return value;
}

/** `--grant` (repeatable): each grantee once. */
export function parseGrantList(value: string, previous: string[] = []): string[] {
  const grantee = parseGrantee(value);
  if (previous.includes(grantee)) throw usageError(`--grant ${grantee} is given twice`);
  return [...previous, grantee];
}

/** The grants column of a listing: grantees, comma-separated ("admin keys only" when none). */
export function grantsColumn(grants: readonly { grantee: string }[]): string {
  return grants.length === 0 ? '(admin keys only)' : grants.map((g) => g.grantee).join(',');
}

export function parseSecretName(value: string): string {
  const parsed = SecretNameSchema.safeParse(value);
  if (!parsed.success) throw usageError(`invalid secret name ${JSON.stringify(value.slice(0, 80))}: a secret name is [A-Z_][A-Z0-9_]*, at most 64 characters`, { name: value.slice(0, 80) });
  return parsed.data;
}

export interface SecretInput extends NodeJS.ReadableStream {
  isTTY?: boolean;
  setRawMode?: (mode: boolean) => unknown;
}

/**
 * The value from stdin: everything until end of input when piped (`cairn secrets set NAME < file`),
 * or one line typed without echo at a terminal. Empty input is E_INPUT.
 */
export async function readSecretValue(stdin: SecretInput, prompt: (text: string) => void): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  let size = 0;
  const interactive = stdin.isTTY === true && typeof stdin.setRawMode === 'function';
  if (interactive) {
    prompt('value (not echoed, Enter to end): ');
    stdin.setRawMode?.(true);
  }
  try {
    for await (const chunk of stdin) {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk);
      if (interactive) {
        if (buffer.includes(0x03)) throw usageError('cancelled: no secret was stored');
        const end = buffer.findIndex((byte) => byte === 0x0d || byte === 0x0a || byte === 0x04);
        if (end !== -1) {
          chunks.push(buffer.subarray(0, end));
          break;
        }
      }
      size += buffer.length;
      if (size > MAX_STDIN_BYTES) throw usageError(`the value on stdin is larger than ${MAX_STDIN_BYTES} bytes`);
      chunks.push(buffer);
    }
  } finally {
    if (interactive) {
      stdin.setRawMode?.(false);
      prompt('\n');
    }
  }
  const value = withoutTrailingNewline(new Uint8Array(Buffer.concat(chunks)));
  for (const chunk of chunks) chunk.fill(0);
  if (value.length === 0) throw usageError('no value on stdin: pipe it in, e.g. `cairn secrets set NAME < token.txt`');
  return value;
}

function putSecret(client: Cairn, name: string, value: Uint8Array, grants: readonly string[]) {
  return client.secrets.put(name, value, { grant: grants });
}

export function registerSecretsCommand(program: Command, context: CommandContext, stdin: SecretInput = process.stdin): void {
  const secrets = program
    .command('secrets')
    .description("the tenant's secret store (write-only): a run lists names under `secrets:` and reads each from /run/secrets/NAME")
    .addHelpText(
      'after',
      '\nValues are sealed with the stack\'s key file and never shown again; output that contains one is redacted and the run ends ROLLBACK E_SECRET_SEEN.\n' +
        'A run or sandbox may use a secret when its key holds the secrets:use scope and a grant: the key that set it, the\n' +
        'tenant\'s admin keys, and whatever `--grant` / `cairn secrets grant` adds (key:<key id>, or scope:<scope>).\n' +
        'Needs an API key with the secrets:write (or admin) scope; changing an existing secret needs a grant of it too.',
    );

  secrets
    .command('set')
    .description('store a secret; its value is read from stdin (never an argument), one trailing newline dropped')
    .argument('<name>', 'the secret name, [A-Z_][A-Z0-9_]*')
    .option('--grant <grantee>', 'grant it to key:<key id> or scope:<scope> as well (repeatable; the key setting it is granted anyway)', parseGrantList)
    .addHelpText(
      'after',
      '\nExamples:\n  cairn secrets set API_TOKEN < token.txt\n  printf %s "$TOKEN" | cairn secrets set API_TOKEN --grant key:<ci key id>\n  cairn secrets set API_TOKEN        # at a terminal: typed without echo',
    )
    .action(async (rawName: string, options: { grant?: string[] }, command: Command) => {
      const output = context.output(command);
      const name = parseSecretName(rawName);
      const value = await readSecretValue(stdin, (text) => context.streams.stderr.write(text));
      const { client } = await resolveTarget(context.env);
      try {
        const stored = await putSecret(client, name, value, options.grant ?? []);
        output.result(`${output.okMark()}  secret ${stored.name} ${stored.created ? 'stored' : 'replaced'} (…${stored.lastFour})`, { ok: true, ...stored });
      } finally {
        value.fill(0);
      }
    });

  secrets
    .command('ls')
    .description("the tenant's secrets: name, last four characters, when set, who may use it (never a value)")
    .action(async (_options: unknown, command: Command) => {
      const output = context.output(command);
      const { client } = await resolveTarget(context.env);
      const listed = await client.secrets.list();
      const width = Math.max(4, ...listed.items.map((s) => s.name.length));
      const lines = [
        `${'NAME'.padEnd(width)}  LAST4  UPDATED                   GRANTED TO (besides admin keys)`,
        ...listed.items.map((s) => `${s.name.padEnd(width)}  ${(s.lastFour ?? '????').padEnd(5)}  ${s.updatedAt.padEnd(24)}  ${grantsColumn(s.grants)}`),
      ];
      output.result(listed.items.length === 0 ? 'no secrets' : lines.join('\n'), { ok: true, items: listed.items });
    });

  secrets
    .command('rm')
    .description('remove a secret (runs already placed that name it fail before they start)')
    .argument('<name>', 'the secret name')
    .action(async (rawName: string, _options: unknown, command: Command) => {
      const output = context.output(command);
      const name = parseSecretName(rawName);
      const { client } = await resolveTarget(context.env);
      const deleted = await client.secrets.delete(name);
      output.result(`${output.okMark()}  secret ${deleted.name} removed`, { ok: true, ...deleted });
    });

  secrets
    .command('grant')
    .description('let more keys use a secret: key:<key id>, or scope:<scope> for every key of the tenant holding it (using it also needs secrets:use)')
    .argument('<name>', 'the secret name')
    .argument('<grantee...>', 'key:<key id> or scope:<scope>, one or more')
    .addHelpText('after', '\nExamples:\n  cairn secrets grant API_TOKEN key:5f0c…\n  cairn secrets grant API_TOKEN scope:runs:write')
    .action(async (rawName: string, rawGrantees: string[], _options: unknown, command: Command) => {
      const output = context.output(command);
      const name = parseSecretName(rawName);
      const grantees = [...new Set(rawGrantees.map(parseGrantee))];
      const { client } = await resolveTarget(context.env);
      const granted = await client.secrets.grant(name, grantees);
      output.result(`${output.okMark()}  secret ${granted.name} granted to ${grantsColumn(granted.grants)}`, { ok: true, ...granted });
    });

  secrets
    .command('revoke')
    .description('take a grant back: runs decided after it may no longer use the secret')
    .argument('<name>', 'the secret name')
    .argument('<grantee>', 'key:<key id> or scope:<scope>')
    .action(async (rawName: string, rawGrantee: string, _options: unknown, command: Command) => {
      const output = context.output(command);
      const name = parseSecretName(rawName);
      const grantee = parseGrantee(rawGrantee);
      const { client } = await resolveTarget(context.env);
      const left = await client.secrets.revoke(name, grantee);
      output.result(`${output.okMark()}  secret ${left.name}: ${grantee} revoked; granted to ${grantsColumn(left.grants)}`, { ok: true, revoked: grantee, ...left });
    });

  secrets
    .command('rotate-key')
    .description("where the secrets private key file is: a fresh keypair becomes current, and every value of the catalog is re-sealed to it")
    .addHelpText(
      'after',
      '\nThen restart the gateway (cairn down && cairn up) so it seals to the new key (running workers read the new key on\n' +
        'their own), and run\n' +
        '`cairn secrets reseal` once more for values set in between. Older keys stay in the private key file (values sealed\n' +
        'to them still open) until you remove their lines. Uses the operator\'s NATS user (CAIRN_NATS_CREDS_FILE).',
    )
    .action(async (_options: unknown, command: Command) => {
      const output = context.output(command);
      const { rotateSecretsKey } = await import('../secrets-keys.runner.js');
      const rotated = await rotateSecretsKey(context.env);
      const lines = [
        `${output.okMark()}  secrets key ${rotated.current} is current (was ${rotated.previous}; ${rotated.keys} keys in the private key file)`,
        `   re-sealed ${rotated.resealed}${rotated.unreadable.length === 0 ? '' : `; cannot open ${rotated.unreadable.join(', ')}`}`,
        '   restart the gateway (cairn down && cairn up), then run `cairn secrets reseal`',
      ];
      output.result(lines.join('\n'), { ok: rotated.unreadable.length === 0, ...rotated });
    });

  secrets
    .command('reseal')
    .description('where the secrets private key file is: re-seal to its current key every value of the catalog sealed to an older one')
    .action(async (_options: unknown, command: Command) => {
      const output = context.output(command);
      const { resealSecrets } = await import('../secrets-keys.runner.js');
      const done = await resealSecrets(context.env);
      const line = `${output.okMark()}  re-sealed ${done.resealed} to key ${done.keyId}${done.unreadable.length === 0 ? '' : `; cannot open ${done.unreadable.join(', ')}`}`;
      output.result(line, { ok: done.unreadable.length === 0, ...done });
    });
}
