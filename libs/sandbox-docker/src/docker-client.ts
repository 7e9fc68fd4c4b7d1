import { CairnError, isCairnError, type ErrorCode } from '@cairn/contracts';
import Docker from 'dockerode';

export const DEFAULT_DOCKER_SOCKET = '/var/run/docker.sock';
/** Debian 12's engine (20.10) speaks 1.41; newer engines still accept it. */
export const DOCKER_API_VERSION = 'v1.41';

export function createDockerClient(socketPath: string = DEFAULT_DOCKER_SOCKET): Docker {
  return new Docker({ socketPath, version: DOCKER_API_VERSION });
}

interface EngineErrorShape {
  statusCode?: unknown;
  code?: unknown;
  reason?: unknown;
  json?: unknown;
  message?: unknown;
}

const UNREACHABLE = new Set(['ENOENT', 'ECONNREFUSED', 'EACCES', 'ECONNRESET', 'EPIPE', 'ENOTSOCK', 'ETIMEDOUT', 'EHOSTUNREACH']);

/** The HTTP status the engine answered with, when it answered at all. */
export function engineStatus(error: unknown): number | undefined {
  const status = (error as EngineErrorShape | null)?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

/** True when no engine answered: the socket is missing, refused or not ours to use. */
export function isEngineUnreachable(error: unknown): boolean {
  const code = (error as EngineErrorShape | null)?.code;
  return engineStatus(error) === undefined && typeof code === 'string' && UNREACHABLE.has(code);
}

/** The engine's own words, for error details (it answers `{ message }` in JSON). */
export function engineMessage(error: unknown): string {
  const e = error as EngineErrorShape | null;
  const json = e?.json as { message?: unknown } | null | undefined;
  if (typeof json?.message === 'string') return json.message;
  if (typeof e?.reason === 'string' && typeof e.message !== 'string') return e.reason;
  return typeof e?.message === 'string' ? e.message : String(error);
}

/**
 * Turns an engine failure into a `CairnError`: no engine at all is always `E_RUNTIME_ABSENT`;
 * a `CairnError` passes through; anything else becomes `code`.
 */
export function engineError(error: unknown, code: ErrorCode, what: string, details: Record<string, unknown> = {}): CairnError {
  if (isCairnError(error)) return error;
  const cause = engineMessage(error);
  if (isEngineUnreachable(error)) {
    return new CairnError('E_RUNTIME_ABSENT', `no container engine answers (${what}): ${cause}`, { ...details, cause });
  }
  const status = engineStatus(error);
  return new CairnError(code, `${what}: ${cause}`, { ...details, cause, ...(status === undefined ? {} : { status }) });
}
