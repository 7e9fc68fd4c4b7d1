import type { ErrorBody } from '@cairn/contracts';
import { escapeLineSeparators, jsonLine } from '@cairn/evidence';

/** Where a command writes: data to stdout, progress and logs to stderr. */
export interface CliStreams {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
}

/** Colour and redrawn lines only for a person at a terminal that has not asked for plain text. */
export function isInteractive(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  const noColor = env.NO_COLOR !== undefined && env.NO_COLOR !== '';
  return stream.isTTY === true && !noColor && env.TERM !== 'dumb';
}

const GREEN = '\u001b[32m';
const RED = '\u001b[31m';
const RESET = '\u001b[0m';

function paint(text: string, colour: string, enabled: boolean): string {
  return enabled ? `${colour}${text}${RESET}` : text;
}

/** `error E_CODE: message`, the one human shape of every failure. */
export function formatHumanError(body: ErrorBody, colour = false): string {
  return `${paint('error', RED, colour)} ${body.code}: ${body.message}`;
}

/** `{ ok: false, error: { code, message, details } }`, the one machine shape of every failure. */
export function formatJsonError(body: ErrorBody): string {
  return escapeLineSeparators(JSON.stringify({ ok: false, error: { code: body.code, message: body.message, details: body.details ?? {} } }));
}

/** Human or `--json` output for one command invocation. */
export class Output {
  private readonly colourOut: boolean;
  private readonly colourErr: boolean;

  constructor(
    private readonly streams: CliStreams,
    readonly json: boolean,
  ) {
    this.colourOut = isInteractive(streams.stdout, streams.env);
    this.colourErr = isInteractive(streams.stderr, streams.env);
  }

  /** The command's result, on stdout: the JSON document with `--json`, the human line otherwise. */
  result(human: string, machine: Record<string, unknown>): void {
    this.streams.stdout.write(this.json ? jsonLine(machine) : `${human}\n`);
  }

  /** `OK` in green when a person is watching. */
  okMark(): string {
    return paint('OK', GREEN, this.colourOut);
  }

  /** A note for people, on stderr (so it never mixes into data on stdout). */
  note(message: string): void {
    this.streams.stderr.write(`${message}\n`);
  }

  /** A failure: the JSON document on stdout with `--json` (machines read one stream), else stderr. */
  failure(body: ErrorBody, stack?: string): void {
    if (this.json) {
      this.streams.stdout.write(`${formatJsonError(body)}\n`);
      return;
    }
    this.streams.stderr.write(`${formatHumanError(body, this.colourErr)}\n`);
    if (stack !== undefined) this.streams.stderr.write(`${stack}\n`);
  }

  progress(): Progress {
    return new Progress(this.streams.stderr, isInteractive(this.streams.stderr, this.streams.env));
  }
}

/**
 * Progress of long work on stderr: a line redrawn in place at a terminal, an occasional plain
 * line otherwise (logs stay readable, and nothing animates in CI).
 */
export class Progress {
  private lastWrite: number;
  private drawn = false;

  constructor(
    private readonly stderr: NodeJS.WritableStream,
    private readonly interactive: boolean,
    private readonly now: () => number = Date.now,
  ) {
    // Quick work shows no progress at all: the first line waits one interval.
    this.lastWrite = now();
  }

  update(text: string): void {
    const interval = this.interactive ? 100 : 2_000;
    const at = this.now();
    if (at - this.lastWrite < interval) return;
    this.lastWrite = at;
    if (this.interactive) {
      this.stderr.write(`\r${text}\u001b[K`);
      this.drawn = true;
    } else {
      this.stderr.write(`${text}\n`);
    }
  }

  /** Clears the redrawn line so the next output starts clean. */
  done(): void {
    if (this.drawn) this.stderr.write('\r\u001b[K');
    this.drawn = false;
  }
}
