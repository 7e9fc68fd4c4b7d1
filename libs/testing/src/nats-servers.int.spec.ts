import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pinnedNatsServerBinary, startNatsServers } from './nats-servers.js';
import type { NatsServers } from './nats-servers.js';

const DEPLOY = fileURLToPath(new URL('../../../deploy/nats/', import.meta.url));

let cluster: NatsServers;

beforeAll(async () => {
  cluster = await startNatsServers({ label: 'harness' });
});

afterAll(async () => {
  await cluster?.stop();
});

describe('the deployed NATS configurations', () => {
  it.each(['nats-server.conf', 'cluster/node-1.conf', 'cluster/node-2.conf', 'cluster/node-3.conf'])('%s is one the pinned server accepts', (file) => {
    const checked = spawnSync(pinnedNatsServerBinary(), ['-t', '-c', `${DEPLOY}${file}`], { encoding: 'utf8' });
    expect(checked.status, checked.stderr).toBe(0);
    expect(checked.stderr).toContain('is valid');
  });
});

describe('startNatsServers', () => {
  it('runs three nodes of the pinned version, with the deployed sync policy, agreeing on a meta leader', async () => {
    expect(cluster.nodes).toHaveLength(3);
    expect(cluster.urls.split(',')).toHaveLength(3);
    const version = readFileSync(`${DEPLOY}VERSION`, 'utf8').trim();
    for (const node of cluster.nodes) {
      const varz = await cluster.monitor<{ version: string; server_name: string; jetstream: { config: { sync_always?: boolean } }; cluster: { name: string; urls?: string[] } }>(node.name, '/varz');
      expect(varz).toMatchObject({ version: version.replace(/^v/, ''), server_name: node.name, jetstream: { config: { sync_always: true } }, cluster: { name: 'harness' } });
    }
    expect(cluster.nodes.map((n) => n.name)).toContain(await cluster.waitForMetaLeader());
  });

  it('runs a server without the sync policy when asked (for the benchmark that prices it)', async () => {
    const lazy = await startNatsServers({ nodes: 1, sync: 'default', label: 'harness-lazy' });
    try {
      const varz = await lazy.monitor<{ jetstream: { config: { sync_always?: boolean; sync_interval: number } } }>(lazy.nodes[0]!.name, '/varz');
      expect(varz?.jetstream.config.sync_always ?? false).toBe(false);
      expect(varz?.jetstream.config.sync_interval).toBe(120_000_000_000);
    } finally {
      await lazy.stop();
    }
  });

  it('says where the binary should be, and how to build it, when it is not there', () => {
    const saved = process.env.CAIRN_TOOLS_DIR;
    process.env.CAIRN_TOOLS_DIR = '/nonexistent-cairn-tools';
    try {
      expect(() => pinnedNatsServerBinary()).toThrow(/nats-server v\d+\.\d+\.\d+ \(deploy\/nats\/VERSION\) is not at \/nonexistent-cairn-tools\/nats-server\/v.*: run `bash tools\/ensure-services.sh`/);
    } finally {
      if (saved === undefined) delete process.env.CAIRN_TOOLS_DIR;
      else process.env.CAIRN_TOOLS_DIR = saved;
    }
  });
});
