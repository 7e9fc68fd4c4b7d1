import { redactUrl } from '@cairn/config';
import { CairnError, isCairnError } from '@cairn/contracts';
import { connect, createInbox } from '@nats-io/transport-node';
import type { ConnectionOptions, NatsConnection } from '@nats-io/transport-node';
import { natsAuthenticatorFromFile } from './nats-credentials.js';

/**
 * The oldest nats-server Cairn runs on. 2.12 brings what the log relies on or will: a replicated
 * compare-and-set that is safe (2.10), `filter_subjects` (2.10), `Nats-Expected-Last-Subject-Sequence-Subject`
 * (2.11) and atomic batch publish (2.12). The version we install is pinned in `deploy/nats/VERSION`.
 */
export const MIN_NATS_SERVER_VERSION = '2.12.0';

const INSTALL_HINT = 'run `bash tools/ensure-services.sh` as root: it builds and starts the nats-server pinned in deploy/nats/VERSION';

/** `[major, minor, patch]` of a nats-server version (`2.15.2`, `v2.12.1-RC.3`), or null when it is not one. */
export function parseServerVersion(version: string): [number, number, number] | null {
  const match = /^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(version.trim());
  if (match === null) return null;
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}

/** Why a server of this version cannot hold Cairn's log, or null when it can. */
export function serverVersionProblem(version: string | undefined, minimum: string = MIN_NATS_SERVER_VERSION): string | null {
  const min = parseServerVersion(minimum);
  if (min === null) throw new Error(`not a version: ${minimum}`);
  if (version === undefined || version === '') return `the NATS server did not say its version; Cairn needs ${minimum} or newer`;
  const found = parseServerVersion(version);
  if (found === null) return `the NATS server's version "${version.slice(0, 40)}" cannot be read; Cairn needs ${minimum} or newer`;
  for (let i = 0; i < 3; i++) {
    if (found[i]! > min[i]!) return null;
    if (found[i]! < min[i]!) return `the NATS server is ${version}; Cairn needs ${minimum} or newer`;
  }
  return null;
}

/** Refuses (E_UNAVAILABLE, naming the version found and how to install ours) a server too old for the log. */
export function assertSupportedNatsServer(nc: NatsConnection): void {
  const problem = serverVersionProblem(nc.info?.version);
  if (problem !== null) {
    throw new CairnError('E_UNAVAILABLE', `${problem}: ${INSTALL_HINT}`, {
      found: nc.info?.version ?? null,
      minimum: MIN_NATS_SERVER_VERSION,
    });
  }
}

export interface ConnectNatsOptions extends Omit<ConnectionOptions, 'servers'> {
  /** One URL or several, comma-separated (as `CAIRN_NATS_URL` holds them). */
  servers: string;
  /** This process's nkey seed file (CAIRN_NATS_CREDS_FILE, mode 0600); checked before anything connects. */
  credsFile?: string;
}

/**
 * Connects to NATS and checks the server's version; every Cairn process connects through this.
 * A connection that cannot be made, or a server older than {@link MIN_NATS_SERVER_VERSION}, is E_UNAVAILABLE
 * (the connection is closed first).
 */
export async function connectNats(options: ConnectNatsOptions): Promise<NatsConnection> {
  const { servers, credsFile, ...rest } = options;
  // A bad file is E_INPUT naming it, before any connection is tried.
  const authenticator = credsFile === undefined ? undefined : await natsAuthenticatorFromFile(credsFile);
  let nc: NatsConnection;
  try {
    // noAsyncTraces: no Error (and its stack) made ahead of every request, publish and ack on the chance
    // it times out — a few % of a service's CPU; a timeout is still reported, without the caller's frames.
    nc = await connect({ noAsyncTraces: true, ...rest, ...(authenticator === undefined ? {} : { authenticator }), servers: servers.split(',') });
  } catch (error) {
    const where = servers.split(',').map(redactUrl).join(',');
    // Refused credentials are not an outage: say which, and where they came from.
    if (error instanceof Error && /authoriz|authentic/i.test(error.message)) {
      const given = credsFile === undefined ? 'no credentials (CAIRN_NATS_CREDS_FILE is unset)' : `the credentials in ${credsFile}`;
      throw new CairnError('E_UNAUTHORIZED', `the NATS server at ${where} refused ${given}: ${error.message}`, credsFile === undefined ? {} : { credsFile });
    }
    throw new CairnError('E_UNAVAILABLE', `cannot connect to NATS at ${where}: ${error instanceof Error ? error.message : String(error)}`);
  }
  try {
    assertSupportedNatsServer(nc);
  } catch (error) {
    await nc.close().catch(() => undefined);
    throw isCairnError(error) ? error : new CairnError('E_UNAVAILABLE', String(error));
  }
  return nc;
}

/**
 * A new inbox under the connection's own prefix (`inboxPrefix`, `_INBOX` by default), and under
 * `purpose` when given (`<prefix>.<purpose>.<id>`: a kind of answer a peer may be let publish into,
 * and no other). With NATS users (ADR 0022) a service may subscribe only to the inboxes of its own
 * prefix, so every reply subject a Cairn client makes comes from here, never from a bare `createInbox()`.
 */
export function inboxOf(nc: NatsConnection, purpose?: string): string {
  const prefix = (nc as NatsConnection & { options?: { inboxPrefix?: string } }).options?.inboxPrefix || '_INBOX';
  return createInbox(purpose === undefined ? prefix : `${prefix}.${purpose}`);
}
