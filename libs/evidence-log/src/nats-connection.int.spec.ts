import { isCairnError } from '@cairn/contracts';
import { startOldNatsServer, testNatsUrl, uniqueName } from '@cairn/testing';
import type { OldNatsServer } from '@cairn/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { EvidenceLog } from './evidence-log.adapter.js';
import { connectNats, MIN_NATS_SERVER_VERSION, parseServerVersion } from './nats-connection.js';

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

let old: OldNatsServer | undefined;
afterEach(async () => {
  await old?.close();
  old = undefined;
});

describe('connectNats', () => {
  it('connects to the machine’s server, which is at least the minimum', async () => {
    const nc = await connectNats({ servers: testNatsUrl(), name: 'cairn-version-test' });
    try {
      const version = parseServerVersion(nc.info!.version)!;
      const min = parseServerVersion(MIN_NATS_SERVER_VERSION)!;
      expect(version[0] * 1e6 + version[1] * 1e3 + version[2]).toBeGreaterThanOrEqual(min[0] * 1e6 + min[1] * 1e3 + min[2]);
    } finally {
      await nc.close();
    }
  });

  it('refuses a server older than the minimum with E_UNAVAILABLE naming its version and how to install ours', async () => {
    old = await startOldNatsServer('2.9.10');
    const error = await errorOf(connectNats({ servers: old.url, name: 'cairn-version-test', maxReconnectAttempts: 0 }));
    expect(isCairnError(error) && error.code).toBe('E_UNAVAILABLE');
    expect(String((error as Error).message)).toContain('the NATS server is 2.9.10; Cairn needs 2.12.0 or newer');
    expect(String((error as Error).message)).toContain('tools/ensure-services.sh');
    expect(old.connections()).toBe(1);
  });

  it('is what the evidence log opens with: an old server gets no stream', async () => {
    old = await startOldNatsServer('2.11.4');
    const error = await errorOf(EvidenceLog.connect({ servers: old.url, stream: uniqueName('OLD'), subjectPrefix: uniqueName('old') }));
    expect(isCairnError(error) && error.code).toBe('E_UNAVAILABLE');
    expect(String((error as Error).message)).toContain('2.11.4');
  });

  it('names the server without its credentials when it cannot connect', async () => {
    const error = await errorOf(connectNats({ servers: 'nats://svc:hunter2@127.0.0.1:1', name: 'cairn-version-test', maxReconnectAttempts: 0, timeout: 1000 }));
    expect(isCairnError(error) && error.code).toBe('E_UNAVAILABLE');
    expect(String((error as Error).message)).not.toContain('hunter2');
    expect(String((error as Error).message)).toContain('127.0.0.1:1');
  });
});
