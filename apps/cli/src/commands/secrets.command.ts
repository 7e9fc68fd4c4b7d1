import { SecretNameSchema } from '@cairn/contracts';
import { withoutTrailingNewline } from '@cairn/secrets';
import type { Command } from 'commander';
import { z } from 'zod';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import type { GatewayClient } from '../gateway-client.js';
import { resolveTarget } from '../stack/stack-target.js';

/*
 * `cairn secrets set|ls|rm`: the tenant's secret store through the gateway, write-only. A value is
 * read from stdin — never from argv, where `ps` and shell history would keep it — and is never
 * printed back: a listing shows its last four characters.
 */

/** What a value may be at most as read (the gateway refuses more than 32 KiB; this only bounds memory). */
const MAX_STDIN_BYTES = 1024 * 1024;

const StoredSchema = z.object({ name: z.string(), created: z.boolean(), lastFour: z.string(), createdAt: z.string(), updatedAt: z.string() });
const ListedSchema = z.object({
  items: z.array(z.object({ name: z.string(), lastFour: z.string().nullable(), keyId: z.string(), createdAt: z.string(), updatedAt: z.string() })),
});
const DeletedSchema = z.object({ name: z.string(), deleted: z.literal(true) });

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

function putSecret(client: GatewayClient, name: string, value: Uint8Array) {
  return client.json(`/v1/secrets/${encodeURIComponent(name)}`, StoredSchema, { method: 'PUT', text: value });
}

export function registerSecretsCommand(program: Command, context: CommandContext, stdin: SecretInput = process.stdin): void {
  const secrets = program
    .command('secrets')
    .description("the tenant's secret store (write-only): a run lists names under `secrets:` and reads each from /run/secrets/NAME")
    .addHelpText(
      'after',
      '\nValues are sealed with the stack\'s key file and never shown again; output that contains one is redacted and the run ends ROLLBACK E_SECRET_SEEN.\n' +
        'Needs an API key with the secrets:write (or admin) scope.',
    );

  secrets
    .command('set')
    .description('store a secret; its value is read from stdin (never an argument), one trailing newline dropped')
    .argument('<name>', 'the secret name, [A-Z_][A-Z0-9_]*')
    .addHelpText('after', '\nExamples:\n  cairn secrets set API_TOKEN < token.txt\n  printf %s "$TOKEN" | cairn secrets set API_TOKEN\n  cairn secrets set API_TOKEN        # at a terminal: typed without echo')
    .action(async (rawName: string, _options: unknown, command: Command) => {
      const output = context.output(command);
      const name = parseSecretName(rawName);
      const value = await readSecretValue(stdin, (text) => context.streams.stderr.write(text));
      const { client } = await resolveTarget(context.env);
      try {
        const stored = await putSecret(client, name, value);
        output.result(`${output.okMark()}  secret ${stored.name} ${stored.created ? 'stored' : 'replaced'} (…${stored.lastFour})`, { ok: true, ...stored });
      } finally {
        value.fill(0);
      }
    });

  secrets
    .command('ls')
    .description("the tenant's secrets: name, last four characters, when set")
    .action(async (_options: unknown, command: Command) => {
      const output = context.output(command);
      const { client } = await resolveTarget(context.env);
      const listed = await client.json('/v1/secrets', ListedSchema);
      const width = Math.max(4, ...listed.items.map((s) => s.name.length));
      const lines = [`${'NAME'.padEnd(width)}  LAST4  UPDATED`, ...listed.items.map((s) => `${s.name.padEnd(width)}  ${(s.lastFour ?? '????').padEnd(5)}  ${s.updatedAt}`)];
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
      const deleted = await client.json(`/v1/secrets/${encodeURIComponent(name)}`, DeletedSchema, { method: 'DELETE' });
      output.result(`${output.okMark()}  secret ${deleted.name} removed`, { ok: true, ...deleted });
    });
}
