import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { compileCache } from '@cairn/testing';

/** The built services the gateway talks to, run as the processes they are (`npm run build` first). */
export const INTAKE_MAIN = fileURLToPath(new URL('../../intake/dist/main.js', import.meta.url));
export const PROJECTOR_MAIN = fileURLToPath(new URL('../../projector/dist/main.js', import.meta.url));
export const WEBHOOKS_MAIN = fileURLToPath(new URL('../../webhooks/dist/main.js', import.meta.url));

/** An intake process on the streams and database `config` names: what records the keys a test mints through the API. */
export function startIntakeFor(config: {
  CAIRN_NATS_URL: string;
  CAIRN_DATABASE_URL: string;
  CAIRN_EVIDENCE_STREAM: string;
  CAIRN_EVIDENCE_SUBJECT_PREFIX: string;
  CAIRN_COMMAND_STREAM: string;
  CAIRN_COMMAND_SUBJECT_PREFIX: string;
}): ServiceProcess {
  return startServiceProcess('intake', INTAKE_MAIN, {
    CAIRN_NATS_URL: config.CAIRN_NATS_URL,
    CAIRN_DATABASE_URL: config.CAIRN_DATABASE_URL,
    CAIRN_EVIDENCE_STREAM: config.CAIRN_EVIDENCE_STREAM,
    CAIRN_EVIDENCE_SUBJECT_PREFIX: config.CAIRN_EVIDENCE_SUBJECT_PREFIX,
    CAIRN_COMMAND_STREAM: config.CAIRN_COMMAND_STREAM,
    CAIRN_COMMAND_SUBJECT_PREFIX: config.CAIRN_COMMAND_SUBJECT_PREFIX,
  });
}

/**
 * A webhooks service process on the streams, database and key file `config` names: what serves the
 * `webhook_register`, `webhook_delete` and `webhook_replay` commands the gateway sends. Resolves once
 * it serves them. It also runs its dispatcher: a test that starts it must queue no delivery to a
 * reachable address.
 */
export async function startWebhooksFor(config: {
  CAIRN_NATS_URL: string;
  CAIRN_DATABASE_URL: string;
  CAIRN_EVIDENCE_STREAM: string;
  CAIRN_EVIDENCE_SUBJECT_PREFIX: string;
  CAIRN_COMMAND_STREAM: string;
  CAIRN_COMMAND_SUBJECT_PREFIX: string;
  CAIRN_SECRETS_KEY_FILE: string;
}): Promise<ServiceProcess> {
  const service = startServiceProcess('webhooks', WEBHOOKS_MAIN, {
    CAIRN_NATS_URL: config.CAIRN_NATS_URL,
    CAIRN_DATABASE_URL: config.CAIRN_DATABASE_URL,
    CAIRN_EVIDENCE_STREAM: config.CAIRN_EVIDENCE_STREAM,
    CAIRN_EVIDENCE_SUBJECT_PREFIX: config.CAIRN_EVIDENCE_SUBJECT_PREFIX,
    CAIRN_COMMAND_STREAM: config.CAIRN_COMMAND_STREAM,
    CAIRN_COMMAND_SUBJECT_PREFIX: config.CAIRN_COMMAND_SUBJECT_PREFIX,
    CAIRN_SECRETS_KEY_FILE: config.CAIRN_SECRETS_KEY_FILE,
  });
  try {
    await waitFor('the webhooks service to serve its commands', () => {
      if (service.child.exitCode !== null) return Promise.reject(new Error(`the webhooks service exited: ${service.output().slice(-2000)}`));
      return Promise.resolve(service.output().includes('"webhook_register"'));
    });
  } catch (error) {
    await service.stop();
    throw error;
  }
  return service;
}

/** Resolves once `service` (a command-serving one: intake, webhooks) logs that it serves its commands. */
export async function untilServing(service: ServiceProcess, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    `${service.name} to serve its commands`,
    () => {
      if (service.child.exitCode !== null) return Promise.reject(new Error(`${service.name} exited: ${service.output().slice(-2000)}`));
      return Promise.resolve(service.output().includes('"msg":"serving commands"'));
    },
    timeoutMs,
  );
}

export interface ServiceProcess {
  readonly name: string;
  readonly child: ChildProcess;
  output(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
}

export function startServiceProcess(name: string, main: string, env: Record<string, string>): ServiceProcess {
  if (!existsSync(main)) throw new Error(`${main} is missing: run \`npm run build\` first`);
  const child = spawn(process.execPath, [main], { env: { PATH: process.env.PATH ?? '', ...compileCache(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    name,
    child,
    output: () => output,
    async stop(graceMs = 5000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

export interface HttpAnswer {
  status: number;
  headers: Headers;
  body: unknown;
  text: string;
}

/** One request to the gateway; the body is parsed as JSON when it is JSON. */
export async function http(
  baseUrl: string,
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  path: string,
  options: { key?: string | null; body?: unknown; rawBody?: string | Uint8Array; headers?: Record<string, string> } = {},
): Promise<HttpAnswer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== undefined && options.key !== null) headers.authorization = `Bearer ${options.key}`;
  let body: string | Uint8Array | undefined;
  if (options.rawBody !== undefined) body = options.rawBody;
  else if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  const response = await fetch(`${baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
  const text = await response.text();
  let parsed: unknown = undefined;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

export interface SseMessage {
  id: string | null;
  event: string | null;
  data: string | null;
  comment: string | null;
}

/** An SSE connection read message by message; `close()` aborts it (the client going away). */
export interface SseConnection {
  status: number;
  headers: Headers;
  /** The next message, or null when the server ended the stream. */
  next(timeoutMs?: number): Promise<SseMessage | null>;
  close(): void;
}

export async function openSse(url: string, key: string, headers: Record<string, string> = {}): Promise<SseConnection> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { accept: 'text/event-stream', authorization: `Bearer ${key}`, ...headers }, signal: controller.signal });
  const reader = response.body?.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let ended = false;
  const parse = (block: string): SseMessage => {
    const message: SseMessage = { id: null, event: null, data: null, comment: null };
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) message.comment = line.slice(1).trim();
      else {
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') message.id = value;
        else if (field === 'event') message.event = value;
        else if (field === 'data') message.data = message.data === null ? value : `${message.data}\n${value}`;
      }
    }
    return message;
  };
  return {
    status: response.status,
    headers: response.headers,
    async next(timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          return parse(block);
        }
        if (ended || reader === undefined) return null;
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new Error(`no SSE message within ${timeoutMs} ms`);
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<'timeout'>((resolve) => {
          timer = setTimeout(() => resolve('timeout'), remaining);
        });
        const chunk = await Promise.race([reader.read(), timeout]);
        clearTimeout(timer);
        if (chunk === 'timeout') throw new Error(`no SSE message within ${timeoutMs} ms`);
        if (chunk.done) ended = true;
        else buffer += decoder.decode(chunk.value as Uint8Array, { stream: true });
      }
    },
    close() {
      controller.abort();
    },
  };
}

export async function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 30_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
