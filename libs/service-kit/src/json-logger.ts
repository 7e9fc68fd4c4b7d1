import { escapeLineSeparators } from '@cairn/evidence';
import { activeTraceIds } from '@cairn/tracing';
import type { LoggerService } from '@nestjs/common';
import { pino } from 'pino';
import type { Logger } from 'pino';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'fatal';
/** What a logger does to a line's fields before writing them. */
export type LogFilter = (fields: Record<string, unknown>) => Record<string, unknown>;
/** Fields every line carries from the ambient context: the trace's ids once tracing is on. */
export type LogContext = () => { trace_id?: string; span_id?: string } | undefined;

let logContext: LogContext | null = null;

/**
 * Sets where every logger finds the current trace context (`trace_id`, `span_id` on each line);
 * `null` goes back to the active OpenTelemetry span's ids (none while tracing is off, ADR 0031).
 */
export function setLogContext(context: LogContext | null): void {
  logContext = context;
}

/**
 * One JSON object per line on stderr (stdout stays free for data and protocols), written by pino:
 * `level` (its name), `ts` (ISO 8601), `service`, the caller's fields, `msg`, and `trace_id`/`span_id`
 * when a trace context is set. U+2028/U+2029 are escaped like every JSON Lines line Cairn writes
 * (`jsonLine`). Fields are whatever the caller passes — never secrets: callers log ids, codes and
 * counts, not payloads — and pass through the logger's filter before pino sees them.
 */
export class JsonLogger implements LoggerService {
  private readonly pino: Logger;

  constructor(
    private readonly service: string,
    private readonly minLevel: LogLevel = 'info',
    private readonly sink: (line: string) => void = (line) => process.stderr.write(line),
    private readonly filter: LogFilter | null = null,
    shared?: Logger,
  ) {
    this.pino =
      shared ??
      pino(
        {
          level: minLevel,
          base: { service },
          messageKey: 'msg',
          timestamp: () => `,"ts":"${new Date().toISOString()}"`,
          formatters: { level: (label) => ({ level: label }) },
          mixin: () => (logContext === null ? activeTraceIds() : logContext()) ?? {},
        },
        // A plain synchronous stream: the line is written (or handed to the sink) before write() returns.
        { write: (line: string) => sink(escapeLineSeparators(line)) },
      );
  }

  write(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
    if (!this.pino.isLevelEnabled(level)) return;
    this.pino[level](this.filter === null ? fields : this.filter(fields), msg);
  }

  /**
   * This logger with every line's fields passed through `filter` first — how a run's logger
   * redacts what a workload chose (a host, a file name in an error) before it is written.
   */
  filtered(filter: LogFilter): JsonLogger {
    const outer = this.filter;
    return new JsonLogger(this.service, this.minLevel, this.sink, outer === null ? filter : (fields) => outer(filter(fields)), this.pino);
  }

  debug(message: unknown, ...rest: unknown[]): void {
    this.write('debug', text(message), context(rest));
  }
  verbose(message: unknown, ...rest: unknown[]): void {
    this.write('debug', text(message), context(rest));
  }
  log(message: unknown, ...rest: unknown[]): void {
    this.write('info', text(message), context(rest));
  }
  warn(message: unknown, ...rest: unknown[]): void {
    this.write('warn', text(message), context(rest));
  }
  error(message: unknown, ...rest: unknown[]): void {
    this.write('error', text(message), context(rest));
  }
  fatal(message: unknown, ...rest: unknown[]): void {
    this.write('fatal', text(message), context(rest));
  }
}

function text(message: unknown): string {
  if (typeof message === 'string') return message;
  if (message instanceof Error) return message.message;
  return safeStringify(message);
}

function context(rest: unknown[]): Record<string, unknown> {
  const last = rest.at(-1);
  return typeof last === 'string' ? { context: last } : {};
}

function safeStringify(value: unknown): string {
  try {
    return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) ?? 'null';
  } catch {
    return '"[unserialisable]"';
  }
}
