import type { Command } from 'commander';
import { Output } from './output.js';
import type { CliStreams } from './output.js';

/** What every command gets: the streams, the environment, and its `--json`-aware output. */
export interface CommandContext {
  streams: CliStreams;
  env: NodeJS.ProcessEnv;
  output(command: Command): Output;
  /**
   * A command whose result is itself a failure (a run that ended ROLLBACK) reports it as its
   * result and sets the exit code here, rather than throwing a second error document.
   * One of exit-codes.ts, or — `cairn sandbox exec` — the program's own exit status (0–255), passed through.
   */
  exitCode: number | null;
}

export function createCommandContext(streams: CliStreams): CommandContext {
  return {
    exitCode: null,
    streams,
    env: streams.env,
    output(command) {
      const { json } = command.optsWithGlobals<{ json?: boolean }>();
      return new Output(streams, json === true);
    },
  };
}
