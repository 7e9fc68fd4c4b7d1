import type { ServerResponse } from 'node:http';
import type { CairnError, ExecStreamLine } from '@cairn/contracts';
import { jsonLine } from '@cairn/evidence';
import type { ExecOutcome, OutputStream } from '@cairn/sandbox-sessions';
import type { FastifyReply } from 'fastify';
import { execSummary } from './sandbox-operations.service.js';

const NDJSON_HEADERS = {
  'content-type': 'application/x-ndjson; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
};

/**
 * The streamed answer of one exec (`Accept: application/x-ndjson`): one JSON object per line (`jsonLine`),
 * written as it happens. The reply is taken over (status and headers sent) only with the first
 * line, so an error before any output is still answered as an ordinary error. Writes after the
 * client went away are dropped: the exec still completes and is recorded on the chain.
 */
export class ExecStream {
  private raw: ServerResponse | null = null;

  constructor(private readonly reply: FastifyReply) {}

  /** True once a line went out: an error can then only be told as the last line. */
  get started(): boolean {
    return this.raw !== null;
  }

  output(stream: OutputStream, chunk: Uint8Array): void {
    this.write({ type: 'output', stream, data: Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('base64') });
  }

  result(outcome: ExecOutcome): void {
    this.write({ type: 'result', ...execSummary(outcome) });
    this.end();
  }

  error(error: CairnError): void {
    this.write({ type: 'error', code: error.code, message: error.message });
    this.end();
  }

  private write(line: ExecStreamLine): void {
    const raw = this.start();
    if (raw.writableEnded || raw.destroyed) return;
    raw.write(jsonLine(line));
  }

  private start(): ServerResponse {
    if (this.raw !== null) return this.raw;
    this.reply.hijack();
    const raw = this.reply.raw;
    raw.writeHead(200, NDJSON_HEADERS);
    this.raw = raw;
    return raw;
  }

  private end(): void {
    if (this.raw !== null && !this.raw.writableEnded && !this.raw.destroyed) this.raw.end();
  }
}
