import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { CairnError } from '@cairn/contracts';
import type { StreamConfig, StreamState } from '@nats-io/jetstream';
import { Empty } from '@nats-io/transport-node';
import { inboxOf } from './nats-connection.js';
import type { Msg, NatsConnection } from '@nats-io/transport-node';

/*
 * A stream's snapshot and its restore through JetStream's own API (`$JS.API.STREAM.SNAPSHOT` /
 * `RESTORE`, which nats.js does not wrap): the server sends its store as chunks, each answered
 * to pace it, an empty one at the end; a restore sends them back. The snapshot is the server's
 * format (a compressed tar of the stream's blocks and its consumers), so a restored stream has
 * every message at its own sequence, and every consumer at its own position.
 */

const API = '$JS.API';
const CHUNK_BYTES = 128 * 1024;
/** A chunk not answered in this long means the other side has gone. */
const CHUNK_TIMEOUT_MS = 30_000;

export interface StreamSnapshot {
  stream: string;
  config: StreamConfig;
  state: StreamState;
  bytes: number;
  sha256: string;
}

interface ApiError {
  error?: { code: number; err_code?: number; description?: string };
}

async function apiRequest<T>(nc: NatsConnection, subject: string, body: unknown, what: string): Promise<T> {
  let reply: Msg;
  try {
    reply = await nc.request(subject, JSON.stringify(body), { timeout: CHUNK_TIMEOUT_MS });
  } catch (error) {
    throw new CairnError('E_UNAVAILABLE', `${what}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const answer = reply.json<T & ApiError>();
  if (answer.error !== undefined) {
    const code = answer.error.code === 404 ? 'E_NOT_FOUND' : answer.error.err_code === 10062 ? 'E_CONFLICT' : 'E_UNAVAILABLE';
    throw new CairnError(code, `${what}: ${answer.error.description ?? `error ${answer.error.code}`}`);
  }
  return answer;
}

/** Writes a snapshot of `stream` (messages checked by the server first, consumers included) to `file`. */
export async function snapshotStream(nc: NatsConnection, stream: string, file: string): Promise<StreamSnapshot> {
  const inbox = inboxOf(nc);
  const out = createWriteStream(file, { flags: 'wx', mode: 0o600 });
  const hash = createHash('sha256');
  let bytes = 0;
  const received = new Promise<void>((resolve, reject) => {
    let idle: NodeJS.Timeout | undefined;
    const fail = (error: Error) => {
      clearTimeout(idle);
      sub.unsubscribe();
      reject(error);
    };
    const watch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => fail(new CairnError('E_UNAVAILABLE', `snapshot of ${stream}: no chunk for ${CHUNK_TIMEOUT_MS / 1000} s`)), CHUNK_TIMEOUT_MS);
    };
    const sub = nc.subscribe(inbox, {
      callback: (error, msg) => {
        if (error !== null) return fail(new CairnError('E_UNAVAILABLE', `snapshot of ${stream}: ${error.message}`));
        const status = msg.headers?.code ?? 0;
        if (status >= 400) return fail(new CairnError('E_UNAVAILABLE', `snapshot of ${stream}: the server stopped it (${status} ${msg.headers?.description ?? ''})`));
        if (msg.data.length === 0) {
          clearTimeout(idle);
          sub.unsubscribe();
          return resolve();
        }
        watch();
        bytes += msg.data.length;
        hash.update(msg.data);
        // Answered once written: the server sends no faster than the file takes it.
        out.write(msg.data, () => msg.respond(Empty));
      },
    });
    watch();
  });
  try {
    const answer = await apiRequest<{ config: StreamConfig; state: StreamState }>(
      nc,
      `${API}.STREAM.SNAPSHOT.${stream}`,
      { deliver_subject: inbox, no_consumers: false, chunk_size: CHUNK_BYTES, jsck: true },
      `snapshot of ${stream}`,
    );
    await received;
    await new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())));
    return { stream, config: answer.config, state: answer.state, bytes, sha256: hash.digest('hex') };
  } catch (error) {
    out.destroy();
    throw error;
  }
}

/**
 * Restores a stream from a snapshot file under its recorded name and configuration. The stream
 * must not exist (E_CONFLICT); a file whose digest is not the one recorded is refused (E_INPUT)
 * before anything is sent.
 */
export async function restoreStream(nc: NatsConnection, snapshot: Omit<StreamSnapshot, 'bytes'>, file: string): Promise<{ messages: number; lastSeq: number }> {
  const digest = createHash('sha256');
  for await (const chunk of createReadStream(file)) digest.update(chunk as Buffer);
  if (digest.digest('hex') !== snapshot.sha256) throw new CairnError('E_INPUT', `${file} is not the snapshot of ${snapshot.stream} the backup recorded (sha256 differs)`);
  const { deliver_subject: target } = await apiRequest<{ deliver_subject: string }>(
    nc,
    `${API}.STREAM.RESTORE.${snapshot.stream}`,
    { config: snapshot.config, state: snapshot.state },
    `restore of ${snapshot.stream}`,
  );
  const send = async (data: Uint8Array, timeout: number): Promise<Msg> => {
    try {
      return await nc.request(target, data, { timeout });
    } catch (error) {
      throw new CairnError('E_UNAVAILABLE', `restore of ${snapshot.stream}: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  for await (const chunk of createReadStream(file, { highWaterMark: CHUNK_BYTES })) await send(chunk as Buffer, CHUNK_TIMEOUT_MS);
  // The end: the server checks and installs the stream, then answers with it.
  const done = (await send(Empty, 120_000)).json<ApiError & { state?: StreamState }>();
  if (done.error !== undefined) throw new CairnError('E_UNAVAILABLE', `restore of ${snapshot.stream}: ${done.error.description ?? `error ${done.error.code}`}`);
  return { messages: done.state?.messages ?? 0, lastSeq: done.state?.last_seq ?? 0 };
}
