import { CairnError, ChainIdSchema, isCairnError } from '@cairn/contracts';
import { LABEL_KEYS, MANAGED_LABEL_VALUE, sandboxLabels, WorkerIdSchema, type SandboxLabels } from '@cairn/sandbox';
import type Docker from 'dockerode';
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { engineError, engineStatus } from './docker-client.js';
import { parseRuleComment, ruleComment, type EgressFirewall } from './egress-firewall.js';
import { EgressProxyProcess } from './egress-proxy-process.js';
import type { EgressDenial } from './egress-proxy.js';
import type { EgressResolver } from './egress-resolver.js';

/*
 * One sandbox's way out (docs/sandbox-hardening.md, "Egress"): a Docker `--internal` bridge of its
 * own, host firewall rules that leave the sandbox only the proxy's port on the gateway, and the
 * allowlisting proxy listening there, a process of its own (egress-proxy-process.ts). All three are
 * set up before the sandbox exists and torn down after it is gone.
 */

/** Marks an egress network (besides the labels every Cairn object carries). */
export const EGRESS_LABEL = 'io.cairn.egress';

/** What a sandbox asks for: the hosts it may reach and what to do with refusals. */
export interface EgressRequest {
  /** `host:port` entries, exactly as granted. */
  allow: readonly string[];
  /** Whether names may resolve to private addresses. */
  allowPrivate: boolean;
  /** Told of each connection the proxy refused. Must not throw. */
  onDenied: (denial: EgressDenial) => void;
  /**
   * Told once if the proxy's process ends (or misbehaves) while the sandbox lives: its egress then
   * fails closed (connections refused). Must not throw.
   */
  onProxyLost?: (reason: string) => void;
}

/** An open egress network; `close` only after its sandbox is gone. */
export interface EgressSession {
  readonly networkName: string;
  readonly networkId: string;
  readonly bridge: string;
  readonly gateway: string;
  readonly subnet: string;
  /** `http://<gateway>:<port>`. */
  readonly proxyUrl: string;
  /** `HTTP_PROXY=…` and friends, for the sandbox's environment. */
  readonly env: readonly string[];
  /** The same, by name: for each command run in the sandbox. */
  readonly envVars: Readonly<Record<string, string>>;
  /** The proxy's process: running (false once it died or was closed), and its host pid. */
  readonly proxy: { readonly alive: boolean; readonly pid: number | null };
  /** Resolves once every refusal the proxy has answered so far was reported (see EgressProxyProcess.flush). */
  flush(): Promise<void>;
  /** Proxy closed, rules removed, network removed and verified gone (true) — idempotent. */
  close(): Promise<boolean>;
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : JSON.stringify(error);
}

/** `cairn-egress-<chain>-<n>`: derived from the sandbox's name, so a restarted runtime finds it. */
export function egressNetworkName(chainId: string, instance: number): string {
  if (!ChainIdSchema.safeParse(chainId).success) throw new RangeError(`not a chain id: ${JSON.stringify(chainId)}`);
  return `cairn-egress-${chainId}-${instance}`;
}

/** The bridge interface of a network: 15 characters at most (IFNAMSIZ), derived from its name. */
export function egressBridgeName(networkName: string): string {
  return `cxe-${createHash('sha256').update(networkName).digest('hex').slice(0, 11)}`;
}

export function proxyEnv(proxyUrl: string): string[] {
  return ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'].map((name) => `${name}=${proxyUrl}`);
}

export interface EgressNetworksOptions {
  docker: Docker;
  resolver: EgressResolver;
  firewall: EgressFirewall;
  /** Who each proxy process runs as (null: this process's user, only when that is not root). */
  proxyUser: { uid: number; gid: number } | null;
}

/** Opens, closes and reconciles egress networks on one engine. */
export class EgressNetworks {
  /** Networks this process has open (id → name): reconcile leaves them to their owner. */
  private readonly open = new Map<string, string>();

  constructor(private readonly options: EgressNetworksOptions) {}

  /**
   * Network, proxy and firewall for the sandbox `labels` names. Any part that cannot be set up
   * takes the others down again and throws `E_SANDBOX_START` (`E_RUNTIME_ABSENT` without an engine
   * or iptables): the sandbox must not start.
   */
  async openFor(labels: SandboxLabels, instance: number, request: EgressRequest): Promise<EgressSession> {
    const { docker } = this.options;
    const name = egressNetworkName(labels.chainId, instance);
    const bridge = egressBridgeName(name);
    const undo: (() => Promise<unknown>)[] = [];
    try {
      let network: Docker.Network;
      try {
        network = await docker.createNetwork({
          Name: name,
          Driver: 'bridge',
          CheckDuplicate: true,
          Internal: true,
          Attachable: false,
          EnableIPv6: false,
          Labels: { ...sandboxLabels(labels), [EGRESS_LABEL]: '1' },
          Options: {
            'com.docker.network.bridge.name': bridge,
            'com.docker.network.bridge.enable_icc': 'false',
            'com.docker.network.bridge.enable_ip_masquerade': 'false',
          },
        });
      } catch (error) {
        throw engineError(error, 'E_SANDBOX_START', `creating egress network ${name}${engineStatus(error) === 409 ? ' (the name is taken)' : ''}`, { name });
      }
      this.open.set(network.id, name);
      undo.push(() => this.removeNetwork(network.id, name));
      const info: Docker.NetworkInspectInfo = await network.inspect();
      const ipam = info.IPAM?.Config?.[0];
      const gateway = ipam?.Gateway;
      const subnet = ipam?.Subnet;
      if (gateway === undefined || subnet === undefined || !/^[0-9.]+$/.test(gateway)) {
        throw new CairnError('E_SANDBOX_START', `egress network ${name} has no IPv4 gateway`, { name });
      }

      const proxy = await EgressProxyProcess.start({
        listenHost: gateway,
        allow: request.allow,
        allowPrivate: request.allowPrivate,
        resolver: this.options.resolver,
        clientSubnet: subnet,
        user: this.options.proxyUser,
        onDenied: request.onDenied,
        onLost: (reason) => request.onProxyLost?.(reason),
      });
      undo.push(() => proxy.close());
      const rules = { workerId: labels.workerId, bridge, gateway, proxyPort: proxy.port };
      await this.options.firewall.install(rules);
      undo.push(() => this.options.firewall.uninstall(rules));

      let closing: Promise<boolean> | null = null;
      const close = (): Promise<boolean> => {
        closing ??= (async () => {
          await proxy.close();
          await this.options.firewall.uninstall(rules);
          return this.removeNetwork(network.id, name);
        })();
        return closing;
      };
      const env = proxyEnv(proxy.url);
      const envVars = Object.fromEntries(env.map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]));
      const proxyState = {
        get alive() {
          return proxy.alive;
        },
        get pid() {
          return proxy.pid;
        },
      };
      return { networkName: name, networkId: network.id, bridge, gateway, subnet, proxyUrl: proxy.url, env, envVars, proxy: proxyState, flush: () => proxy.flush(), close };
    } catch (error) {
      for (const step of undo.reverse()) await step().catch(() => undefined);
      if (isCairnError(error) && (error.code === 'E_SANDBOX_START' || error.code === 'E_RUNTIME_ABSENT')) throw error;
      throw engineError(error, 'E_SANDBOX_START', `setting up egress network ${name}`, { name });
    }
  }

  /**
   * Removes this worker's egress networks whose chain `keep` rejects (or that carry no valid
   * chain), except those this process has open, and every rule of this worker whose network is
   * no longer there. Rules are listed before networks: a rule appears only after its network,
   * so one seen without its network is a leftover, never a network being set up. Returns the
   * names of the networks removed.
   */
  async reconcile(workerId: string, keep: (chainId: string) => boolean): Promise<string[]> {
    if (!WorkerIdSchema.safeParse(workerId).success) throw new CairnError('E_INPUT', `not a worker id: ${JSON.stringify(workerId)}`);
    const { docker, firewall } = this.options;
    // A worker that cannot read the firewall (no iptables, no root) never installed a rule: only
    // its networks, if it has any, make that an error.
    let comments: string[] = [];
    let unreadable: unknown = null;
    try {
      comments = await firewall.list(workerId);
    } catch (error) {
      unreadable = error;
    }
    let listed: Docker.NetworkInspectInfo[];
    try {
      listed = await docker.listNetworks({ filters: { label: [`${LABEL_KEYS.managed}=${MANAGED_LABEL_VALUE}`, `${LABEL_KEYS.worker}=${workerId}`, `${EGRESS_LABEL}=1`] } });
    } catch (error) {
      throw engineError(error, 'E_INTERNAL', 'listing egress networks to reconcile');
    }
    const kept = new Set<string>();
    const removed: string[] = [];
    const failed: string[] = [];
    for (const network of listed) {
      const labels = network.Labels ?? {};
      // The engine filtered by label; check again, so nothing else is ever removed.
      if (labels[LABEL_KEYS.managed] !== MANAGED_LABEL_VALUE || labels[LABEL_KEYS.worker] !== workerId || labels[EGRESS_LABEL] !== '1') continue;
      const bridge = network.Options?.['com.docker.network.bridge.name'] ?? egressBridgeName(network.Name);
      const chain = labels[LABEL_KEYS.chain];
      const valid = chain !== undefined && ChainIdSchema.safeParse(chain).success;
      if (this.open.has(network.Id) || (valid && keep(chain))) {
        kept.add(bridge);
        continue;
      }
      try {
        await firewall.remove([ruleComment(workerId, bridge)]);
        if (await this.removeNetwork(network.Id, network.Name)) removed.push(network.Name);
        else failed.push(network.Name);
      } catch (error) {
        if (isCairnError(error) && error.code === 'E_RUNTIME_ABSENT') throw error;
        failed.push(network.Name);
      }
    }
    if (unreadable !== null && listed.length > 0) failed.push(`the firewall rules (${describeError(unreadable)})`);
    const strays = comments.filter((comment) => {
      const parsed = parseRuleComment(comment);
      return parsed !== null && parsed.workerId === workerId && !kept.has(parsed.bridge);
    });
    await firewall.remove(strays);
    if (failed.length > 0) throw new CairnError('E_INTERNAL', `could not remove egress networks ${failed.join(', ')}`, { removed, failed });
    return removed;
  }

  /**
   * Removes this worker's egress networks of one chain, except those this process has open, with
   * their firewall rules; lists no rule and touches no other chain's network (a create's cheap
   * reap — `reconcile` is the sweep). Returns the names of the networks removed.
   */
  async reapChain(workerId: string, chainId: string): Promise<string[]> {
    const { docker, firewall } = this.options;
    let listed: Docker.NetworkInspectInfo[];
    try {
      listed = await docker.listNetworks({
        filters: { label: [`${LABEL_KEYS.managed}=${MANAGED_LABEL_VALUE}`, `${LABEL_KEYS.worker}=${workerId}`, `${LABEL_KEYS.chain}=${chainId}`, `${EGRESS_LABEL}=1`] },
      });
    } catch (error) {
      throw engineError(error, 'E_INTERNAL', `listing the egress networks of ${chainId}`);
    }
    const removed: string[] = [];
    const failed: string[] = [];
    for (const network of listed) {
      const labels = network.Labels ?? {};
      if (labels[LABEL_KEYS.worker] !== workerId || labels[LABEL_KEYS.chain] !== chainId || labels[EGRESS_LABEL] !== '1' || this.open.has(network.Id)) continue;
      const bridge = network.Options?.['com.docker.network.bridge.name'] ?? egressBridgeName(network.Name);
      try {
        await firewall.remove([ruleComment(workerId, bridge)]);
        if (await this.removeNetwork(network.Id, network.Name)) removed.push(network.Name);
        else failed.push(network.Name);
      } catch (error) {
        if (isCairnError(error) && error.code === 'E_RUNTIME_ABSENT') throw error;
        failed.push(network.Name);
      }
    }
    if (failed.length > 0) throw new CairnError('E_INTERNAL', `could not remove egress networks ${failed.join(', ')}`, { removed, failed });
    return removed;
  }

  /** Removes a network and waits until the engine no longer knows it. */
  private async removeNetwork(id: string, name: string): Promise<boolean> {
    const network = this.options.docker.getNetwork(id);
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        await network.remove();
      } catch (error) {
        const status = engineStatus(error);
        // 404: gone. 403/409/500 "has active endpoints": a container is still leaving; try again.
        if (status === undefined) throw engineError(error, 'E_INTERNAL', `removing egress network ${name}`, { name });
      }
      try {
        await network.inspect();
      } catch (error) {
        if (engineStatus(error) === 404) {
          this.open.delete(id);
          return true;
        }
        throw engineError(error, 'E_INTERNAL', `checking that egress network ${name} is gone`, { name });
      }
      await sleep(100);
    }
    return false;
  }
}
