import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { CairnError } from '@cairn/contracts';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { EXIT_FAILED, EXIT_OK } from '../exit-codes.js';
import { serviceMain } from '../stack/service-process.js';
import { resolveTarget } from '../stack/stack-target.js';

/**
 * The environment of the stdio MCP server: the caller's, minus every CAIRN_* setting, plus the
 * REST gateway to act through and the key to act with (in the environment of a local child
 * process, never on its command line).
 */
export function mcpStdioEnv(base: NodeJS.ProcessEnv, upstreamUrl: string, apiKey: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(base)) if (!key.startsWith('CAIRN_') && value !== undefined) env[key] = value;
  return { ...env, CAIRN_MCP_TRANSPORT: 'stdio', CAIRN_MCP_UPSTREAM_URL: upstreamUrl, CAIRN_API_KEY: apiKey };
}

export function registerMcpCommand(program: Command, context: CommandContext): void {
  program
    .command('mcp')
    .description("serve Cairn's MCP tools on stdin/stdout for an agent (run_submit, run_status, run_events, run_outputs, run_artifact, run_verify, the sandbox and key tools)")
    .addHelpText(
      'after',
      '\nActs through the gateway of the stack in CAIRN_HOME (or CAIRN_URL), with CAIRN_API_KEY when set, else the stack\'s key.\n' +
        'stdout carries MCP protocol messages only; logs go to stderr. Put it in an agent\'s MCP configuration as\n' +
        '  { "command": "npx", "args": ["--no-install", "cairn", "mcp"] }   (run from inside this repository)\n' +
        'The stack also serves MCP over Streamable HTTP: `cairn up` prints that URL.\n' +
        'Exit status: 0 when the client closes stdin, 1 the stack is unreachable or the key is refused (E_UNAUTHORIZED).',
    )
    .action(async () => {
      const { client, apiKey } = await resolveTarget(context.env);
      const main = serviceMain('mcp-gateway');
      if (!existsSync(main)) throw new CairnError('E_UNAVAILABLE', `not built: ${main}; run \`npm run build\` first`, { unbuilt: ['mcp-gateway'] });
      // The child owns stdin and stdout (the protocol); nothing of this process writes to stdout.
      const child = spawn(process.execPath, [main], { stdio: 'inherit', env: mcpStdioEnv(context.env, client.url, apiKey) });
      const forward = (signal: NodeJS.Signals) => () => void child.kill(signal);
      const onInt = forward('SIGINT');
      const onTerm = forward('SIGTERM');
      process.on('SIGINT', onInt);
      process.on('SIGTERM', onTerm);
      try {
        const code = await new Promise<number | null>((resolve, reject) => {
          child.once('error', reject);
          child.once('exit', (exitCode) => resolve(exitCode));
        });
        context.exitCode = code === 0 ? EXIT_OK : EXIT_FAILED;
      } finally {
        process.off('SIGINT', onInt);
        process.off('SIGTERM', onTerm);
      }
    });
}
