import { readFileSync } from 'node:fs';
import { CairnError } from '@cairn/contracts';
import { Command, CommanderError } from 'commander';
import { createCommandContext } from './command-context.js';
import type { CommandContext } from './command-context.js';
import { registerApproveCommand } from './commands/approve.command.js';
import { registerCancelCommand } from './commands/cancel.command.js';
import { registerRegradeCommand } from './commands/regrade.command.js';
import { registerCheckpointsCommand } from './commands/checkpoints.command.js';
import { registerDownCommand } from './commands/down.command.js';
import { registerEventsCommand } from './commands/events.command.js';
import { registerExportCommand } from './commands/export.command.js';
import { registerImagesCommand } from './commands/images.command.js';
import { registerDbRolesCommand } from './commands/db-roles.command.js';
import { registerInitKeysCommand } from './commands/init-keys.command.js';
import { registerKeysCommand, registerTenantsCommand } from './commands/keys.command.js';
import { registerSealKeyCommand } from './commands/seal-key.command.js';
import { registerLogCommand } from './commands/log.command.js';
import { registerMcpCommand } from './commands/mcp.command.js';
import { registerArtifactsCommand, registerLogsCommand } from './commands/outputs.command.js';
import { registerProjectionsCommand } from './commands/projections.command.js';
import { registerBackupCommands } from './commands/backup.command.js';
import { registerRunCommand } from './commands/run.command.js';
import { registerSandboxCommand } from './commands/sandbox.command.js';
import { registerSecretsCommand } from './commands/secrets.command.js';
import { registerStatusCommand } from './commands/status.command.js';
import { registerNatsAuthCommand, registerUpCommand } from './commands/up.command.js';
import { registerVerifyCommand } from './commands/verify.command.js';
import { registerWorkersCommand } from './commands/workers.command.js';
import { EXIT_OK, EXIT_USAGE, toCliFailure } from './exit-codes.js';
import { Output } from './output.js';
import type { CliStreams } from './output.js';

function cliVersion(): string {
  // src/ and dist/ both sit one level below the package root.
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
}

export function buildProgram(context: CommandContext): Command {
  const { streams } = context;
  const program = new Command('cairn')
    .description(
      'Cairn runs untrusted work in hardened sandboxes and keeps a hash-chained evidence log of every step. ' +
        'This CLI starts the stack on this machine, submits and follows runs, and verifies their evidence offline.',
    )
    .version(cliVersion(), '-V, --version', 'print the version')
    .option('--json', 'print results and errors as JSON on stdout (for machines)')
    .helpOption('-h, --help', 'show help for a command')
    .configureHelp({ showGlobalOptions: true })
    .showSuggestionAfterError(true)
    .exitOverride()
    // Commander's own messages are printed by runCli in the one error shape.
    .configureOutput({
      writeOut: (text) => void streams.stdout.write(text),
      writeErr: (text) => void streams.stderr.write(text),
      outputError: () => undefined,
    })
    .addHelpText(
      'after',
      '\nEnvironment: CAIRN_HOME (state dir, default ~/.cairn), CAIRN_URL + CAIRN_API_KEY (another gateway), CAIRN_STACK_ID,\n' +
        'CAIRN_NATS_URL, CAIRN_NATS_REPLICAS, CAIRN_EVIDENCE_STREAM, CAIRN_EVIDENCE_SUBJECT_PREFIX, CAIRN_DATABASE_URL (see docs/configuration.md).\n' +
        'Exit status: 0 ok, 1 failed (e.g. a run ended ROLLBACK, E_CHAIN_BROKEN, E_UNAVAILABLE), 2 usage (E_INPUT).',
    );
  registerUpCommand(program, context);
  registerNatsAuthCommand(program, context);
  registerDownCommand(program, context);
  registerRunCommand(program, context);
  registerStatusCommand(program, context);
  registerEventsCommand(program, context);
  registerLogsCommand(program, context);
  registerArtifactsCommand(program, context);
  registerCancelCommand(program, context);
  registerRegradeCommand(program, context);
  registerSecretsCommand(program, context);
  registerKeysCommand(program, context);
  registerTenantsCommand(program, context);
  registerApproveCommand(program, context);
  registerVerifyCommand(program, context);
  registerSandboxCommand(program, context);
  registerMcpCommand(program, context);
  registerExportCommand(program, context);
  registerCheckpointsCommand(program, context);
  registerImagesCommand(program, context);
  registerWorkersCommand(program, context);
  registerInitKeysCommand(program, context);
  registerDbRolesCommand(program, context);
  registerSealKeyCommand(program, context);
  registerProjectionsCommand(program, context);
  registerBackupCommands(program, context);
  registerLogCommand(program, context);
  return program;
}

/** `--json` is honoured even when the command line fails to parse. */
function wantsJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

function usageFailure(error: CommanderError): CairnError {
  if (error.code === 'commander.help') return new CairnError('E_INPUT', 'no command given (see the commands above)');
  return new CairnError('E_INPUT', error.message.replace(/^error: /, ''), { reason: error.code.replace(/^commander\./, '') });
}

/**
 * Runs one command line and returns its exit code (exit-codes.ts, or the status of a program that
 * `cairn sandbox exec` ran); never throws, never exits the process.
 */
export async function runCli(argv: readonly string[], streams: CliStreams): Promise<number> {
  const context = createCommandContext(streams);
  const program = buildProgram(context);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return context.exitCode ?? EXIT_OK;
  } catch (error) {
    const output = new Output(streams, wantsJson(argv));
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version') return EXIT_OK;
      output.failure(usageFailure(error).toBody());
      return EXIT_USAGE;
    }
    const failure = toCliFailure(error);
    const debug = streams.env.CAIRN_DEBUG !== undefined && streams.env.CAIRN_DEBUG !== '';
    if (failure.stack !== undefined && !debug && !output.json) {
      failure.body.message += ' (set CAIRN_DEBUG=1 for the stack trace)';
    }
    output.failure(failure.body, debug ? failure.stack : undefined);
    return failure.exitCode;
  }
}
