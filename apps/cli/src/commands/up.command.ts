import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import type { UpResult } from '../stack/stack-up.js';

interface UpOptions {
  setup: boolean;
  timeout: string;
  natsAuth?: boolean;
}

/** Seconds from an option, as milliseconds; E_INPUT when it is not a positive number. */
export function parseSeconds(value: string, option: string): number {
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0) throw usageError(`${option} takes a positive number of seconds, got ${JSON.stringify(value)}`);
  return Math.round(seconds * 1000);
}

export function formatUp(result: UpResult, okMark: string): { human: string; machine: Record<string, unknown> } {
  const headline =
    result.outcome === 'started'
      ? 'Cairn is up'
      : result.outcome === 'restarted'
        ? `Cairn is up (restarted ${result.restarted.join(', ')})`
        : 'Cairn is already up';
  const human = [
    `${okMark}  ${headline}  ${result.url}`,
    ...(result.mcpUrl === undefined ? [] : [`  mcp       ${result.mcpUrl}  (Streamable HTTP; or stdio: npx --no-install cairn mcp)`]),
    `  api key   ${result.apiKey}`,
    `  key file  ${result.keyFile}  (mode 0600)`,
    `  logs      ${result.logDir}`,
    `  stop it   npx --no-install cairn down`,
  ].join('\n');
  return {
    human,
    machine: {
      ok: true,
      url: result.url,
      mcpUrl: result.mcpUrl ?? null,
      apiKey: result.apiKey,
      keyFile: result.keyFile,
      home: result.home,
      stackId: result.stackId,
      outcome: result.outcome,
      restarted: result.restarted,
      services: result.services,
    },
  };
}

export function registerUpCommand(program: Command, context: CommandContext): void {
  program
    .command('up')
    .description('start the whole stack on this machine in the background (NATS, PostgreSQL and Docker must answer) and wait until it is healthy')
    .option('--no-setup', 'never run tools/ensure-services.sh; only say what is missing')
    .option('--timeout <seconds>', 'how long to wait for the stack to become healthy', '120')
    .option('--nats-auth', 'one NATS user per service (see `cairn nats-auth`; the server must include <home>/nats/auth.conf)')
    .addHelpText(
      'after',
      '\nChecks the Docker engine, NATS and PostgreSQL (running tools/ensure-services.sh as root when one does not answer),\n' +
        'builds the busybox sandbox image if absent, runs the migrations, starts every service as a background process and\n' +
        'waits for the gateway to report them all healthy. Prints the gateway URL and the admin API key.\n' +
        'State lives in CAIRN_HOME (default ~/.cairn): stack.json, api-key (0600), logs/; artifacts go to a NATS object store (CAIRN_ARTIFACT_BUCKET).\n' +
        'Run again when the stack is up: nothing changes, and services that died are started again.\n' +
        'Isolated stacks: CAIRN_STACK_ID=<id> gives own streams, buckets, worker id; CAIRN_GATEWAY_PORT=0 picks a free port.\n' +
        'Exit status: 0 up, 1 something is missing or did not start (E_UNAVAILABLE, with what to do).',
    )
    .action(async (options: UpOptions, command: Command) => {
      const output = context.output(command);
      const timeoutMs = parseSeconds(options.timeout, '--timeout');
      const { stackUp } = await import('../stack/stack-up.js');
      const result = await stackUp(context.env, {
        setup: options.setup,
        timeoutMs,
        progress: (message) => output.note(`[up] ${message}`),
        stderr: context.streams.stderr,
        natsAuth: options.natsAuth === true,
      });
      const { human, machine } = formatUp(result, output.okMark());
      output.result(human, machine);
    });
}

export function registerNatsAuthCommand(program: Command, context: CommandContext): void {
  program
    .command('nats-auth')
    .description("write the stack's NATS users: an nkey per service and the server's authorization include (docs/adr/0022)")
    .addHelpText(
      'after',
      '\nWrites <home>/nats/<service>.nk (mode 0600, kept when present) for every service and for the operator, and\n' +
        '<home>/nats/auth.conf: the nats-server `authorization` block with their public keys and each service\'s\n' +
        'permissions (what it appends, consumes, sends and serves — SERVICE_ROUTES in libs/config). Include it in the\n' +
        'server\'s configuration (`include ./auth.conf`, beside it), reload the server, then `cairn up --nats-auth`.\n' +
        'The stack\'s names (CAIRN_STACK_ID, CAIRN_EVIDENCE_STREAM, …) are read as `cairn up` reads them.',
    )
    .action(async (_options: unknown, command: Command) => {
      const output = context.output(command);
      const { writeNatsAuthFor } = await import('../stack/nats-auth.js');
      const auth = await writeNatsAuthFor(context.env);
      const human = [
        `${output.okMark()}  NATS users of stack ${auth.stackId}`,
        `  include   ${auth.include}  (public keys and permissions; add it to the server's configuration)`,
        ...Object.entries(auth.files).map(([user, file]) => `  ${user.padEnd(9)} ${file}${auth.created.includes(user) ? '  (new)' : ''}`),
        '  then      npx --no-install cairn up --nats-auth',
      ].join('\n');
      output.result(human, { ok: true, stackId: auth.stackId, include: auth.include, dir: auth.dir, files: auth.files, created: auth.created });
    });
}
