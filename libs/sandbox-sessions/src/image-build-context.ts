import { createHash } from 'node:crypto';
import { BuildContextFileSchema, CairnError, MAX_BUILD_CONTEXT_FILES, MAX_BUILD_DOCKERFILE_BYTES } from '@cairn/contracts';
import type { BuildContextFile, ImageBuildOp } from '@cairn/contracts';
import { withDrains } from '@cairn/operational';
import type { RegisteredWorker, WorkerDrain } from '@cairn/operational';
import { liveWorkers } from '@cairn/scheduling';

/*
 * The pure halves of an image build a worker serves (docs/adr/0038): the payload the gateway sends
 * (the Dockerfile, then each context file's bytes, in order, named by a manifest in the op), its
 * reading back on the worker, and which worker builds it.
 */

/** A file of a build's context, in memory. */
export interface ContextFileBytes {
  /** Relative to the context's root, `/`-separated. */
  path: string;
  content: Uint8Array;
  /** Permission bits; default 0o644. */
  mode?: number;
}

export interface PackedBuildContext {
  payload: Uint8Array;
  sha256: string;
  dockerfileBytes: number;
  files: BuildContextFile[];
}

function inputError(message: string, details: Record<string, unknown> = {}): CairnError {
  return new CairnError('E_INPUT', message, details);
}

/** The payload and manifest of a build: E_INPUT for a path or mode the contract refuses, or too many files. */
export function packBuildContext(dockerfile: string, files: readonly ContextFileBytes[]): PackedBuildContext {
  const dockerfileBytes = Buffer.from(dockerfile, 'utf8');
  if (dockerfileBytes.byteLength === 0) throw inputError('the Dockerfile is empty');
  if (dockerfileBytes.byteLength > MAX_BUILD_DOCKERFILE_BYTES) throw inputError(`the Dockerfile is larger than ${MAX_BUILD_DOCKERFILE_BYTES} bytes`);
  if (files.length > MAX_BUILD_CONTEXT_FILES) throw inputError(`the build context has ${files.length} files; at most ${MAX_BUILD_CONTEXT_FILES}`);
  const manifest: BuildContextFile[] = [];
  const seen = new Set<string>();
  for (const file of files) {
    const entry = BuildContextFileSchema.safeParse({ path: file.path, bytes: file.content.byteLength, mode: file.mode ?? 0o644 });
    if (!entry.success) throw inputError(`the build context file ${JSON.stringify(file.path)}: ${entry.error.issues.map((i) => i.message).join('; ')}`, { path: file.path });
    if (seen.has(file.path)) throw inputError(`the build context has ${file.path} twice`, { path: file.path });
    seen.add(file.path);
    manifest.push(entry.data);
  }
  const payload = Buffer.concat([dockerfileBytes, ...files.map((file) => file.content)]);
  return {
    payload: new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength),
    sha256: createHash('sha256').update(payload).digest('hex'),
    dockerfileBytes: dockerfileBytes.byteLength,
    files: manifest,
  };
}

/**
 * The Dockerfile and files a build op's payload holds, once its bytes are checked against the op:
 * the size and sha256 it names, and the manifest's lengths adding up. Anything else is E_INPUT.
 */
export function unpackBuildContext(op: Pick<ImageBuildOp, 'bytes' | 'sha256' | 'dockerfile_bytes' | 'files'>, payload: Uint8Array): { dockerfile: string; files: Required<ContextFileBytes>[] } {
  if (payload.byteLength !== op.bytes || createHash('sha256').update(payload).digest('hex') !== op.sha256) {
    throw inputError('the bytes of the build context do not match the size and sha256 the request named');
  }
  const total = op.dockerfile_bytes + op.files.reduce((sum, file) => sum + file.bytes, 0);
  if (total !== op.bytes) throw inputError(`the build's manifest names ${total} bytes, its payload is ${op.bytes}`);
  let dockerfile: string;
  try {
    dockerfile = new TextDecoder('utf-8', { fatal: true }).decode(payload.subarray(0, op.dockerfile_bytes));
  } catch {
    throw inputError('the Dockerfile is not UTF-8 text');
  }
  let at = op.dockerfile_bytes;
  const files = op.files.map((file) => {
    const content = payload.subarray(at, at + file.bytes);
    at += file.bytes;
    return { path: file.path, content, mode: file.mode };
  });
  return { dockerfile, files };
}

/**
 * The worker that builds: among the live workers (heard from, healthy, not drained — full ones too:
 * a build takes no slot), those that report every base image the Dockerfile names, else all of
 * them; of those, the one a rendezvous hash of the build's content picks, so the same build goes to
 * the same worker while the workers stay the same (and finds its image cached there). Null: none.
 */
export function chooseBuildWorker(
  workers: readonly RegisteredWorker[],
  drains: ReadonlyMap<string, WorkerDrain>,
  options: { bases: readonly string[]; contentSha256: string; now: number; staleAfterMs?: number },
): RegisteredWorker | null {
  const live = liveWorkers(withDrains(workers, drains), options.now, options.staleAfterMs);
  const withBases = live.filter((worker) => options.bases.every((base) => Object.hasOwn(worker.images, base)));
  const candidates = withBases.length > 0 ? withBases : live;
  let best: { worker: RegisteredWorker; score: string } | null = null;
  for (const worker of candidates) {
    const score = createHash('sha256').update(`${options.contentSha256}\n${worker.workerId}`).digest('hex');
    if (best === null || score > best.score) best = { worker, score };
  }
  return best?.worker ?? null;
}
