import { once } from 'node:events';
import { open, rename, rm } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { jsonLine } from '@cairn/evidence';
import { usageError } from './exit-codes.js';

/** Where a chain file goes: receipts in, one JSON line each; `commit` makes it visible. */
export interface ChainFileSink {
  writeReceipt(receipt: unknown): Promise<void>;
  /** Flushes; for a file, renames the finished temp file into place. */
  commit(): Promise<void>;
  /** Drops whatever was written (a file's temp copy is removed). */
  abort(): Promise<void>;
}

const FLUSH_BYTES = 64 * 1024;

function errnoCode(error: unknown): string {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : 'failed';
}

/** A receipt as one line (`jsonLine`: no raw newline, U+2028/U+2029 escaped, the same parsed value). */
export function receiptLine(receipt: unknown): string {
  return jsonLine(receipt);
}

/** Writes to stdout, waiting for a slow reader rather than buffering the whole chain. */
export function stdoutSink(stdout: NodeJS.WritableStream): ChainFileSink {
  return {
    async writeReceipt(receipt) {
      if (!stdout.write(receiptLine(receipt))) await once(stdout, 'drain');
    },
    async commit() {},
    async abort() {},
  };
}

/**
 * Writes a temp file beside the target and renames it into place once complete and synced, so
 * the target is either the whole chain or untouched, never half a chain.
 */
export async function atomicFileSink(target: string): Promise<ChainFileSink> {
  const temp = join(dirname(target), `.${basename(target)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  let handle: FileHandle;
  try {
    handle = await open(temp, 'wx', 0o644);
  } catch (error) {
    throw usageError(`cannot write ${target}: ${errnoCode(error)}`, { path: target });
  }
  let buffered: string[] = [];
  let bufferedBytes = 0;
  let closed = false;
  const flush = async () => {
    if (buffered.length === 0) return;
    const chunk = buffered.join('');
    buffered = [];
    bufferedBytes = 0;
    await handle.write(chunk);
  };
  const close = async () => {
    if (closed) return;
    closed = true;
    await handle.close();
  };
  return {
    async writeReceipt(receipt) {
      const line = receiptLine(receipt);
      buffered.push(line);
      bufferedBytes += line.length;
      if (bufferedBytes >= FLUSH_BYTES) await flush();
    },
    async commit() {
      await flush();
      await handle.sync();
      await close();
      await rename(temp, target);
    },
    async abort() {
      await close().catch(() => undefined);
      await rm(temp, { force: true });
    },
  };
}

/** Writes `text` whole to `target` through a temp file renamed into place (a checkpoint, a witness's state). */
export async function atomicTextFile(target: string, text: string): Promise<void> {
  const temp = join(dirname(target), `.${basename(target)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  let handle: FileHandle;
  try {
    handle = await open(temp, 'wx', 0o644);
  } catch (error) {
    throw usageError(`cannot write ${target}: ${errnoCode(error)}`, { path: target });
  }
  try {
    await handle.write(text);
    await handle.sync();
    await handle.close();
    await rename(temp, target);
  } catch (error) {
    await handle.close().catch(() => undefined);
    await rm(temp, { force: true });
    throw usageError(`cannot write ${target}: ${errnoCode(error)}`, { path: target });
  }
}
