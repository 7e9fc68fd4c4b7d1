import { escapeLineSeparators } from '@cairn/evidence';
import type { LoggerService } from '@nestjs/common';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'fatal';
/** What a logger does to a line's fields before writing them. */
export type LogFilter = (fields: Record<string, unknown>) => Record<string, unknown>;
const RANK: Readonly<Record<LogLevel, number>> = { debug: 10, info: 20, warn: 30, error: 40, fatal: 50 };

/**
 * One JSON object per line on stderr (stdout stays free for data and protocols), U+2028/U+2029
 * escaped like every JSON Lines line Cairn writes (`jsonLine`). Fields are
 * whatever the caller passes — never secrets: callers log ids, codes and counts, not payloads.
 */
export class JsonLogger implements LoggerService {
  constructor(
    private readonly service: string,
    private readonly minLevel: LogLevel = 'info',
    private readonly sink: (line: string) => void = (line) => process.stderr.write(line),
    private readonly filter: LogFilter | null = null,
  ) {}

  write(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
    if (RANK[level] < RANK[this.minLevel]) return;
    const record = { ts: new Date().toISOString(), level, service: this.service, msg, ...(this.filter === null ? fields : this.filter(fields)) };
    this.sink(`${escapeLineSeparators(safeStringify(record))}\n`);
  }

  /**
   * This logger with every line's fields passed through `filter` first — how a run's logger
   * redacts what a workload chose (a host, a file name in an error) before it is written.
   */
  filtered(filter: LogFilter): JsonLogger {
    const outer = this.filter;
    return new JsonLogger(this.service, this.minLevel, this.sink, outer === null ? filter : (fields) => outer(filter(fields)));
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
