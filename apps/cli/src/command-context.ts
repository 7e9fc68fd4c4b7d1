import type { Command } from 'commander';
import { Output } from './output.js';
import type { CliStreams } from './output.js';

/** What every command gets: the streams, the environment, and its `--json`-aware output. */
export interface CommandContext {
  streams: CliStreams;
  env: NodeJS.ProcessEnv;
  output(command: Command): Output;
}

export function createCommandContext(streams: CliStreams): CommandContext {
  return {
    streams,
    env: streams.env,
    output(command) {
      const { json } = command.optsWithGlobals<{ json?: boolean }>();
      return new Output(streams, json === true);
    },
  };
}
