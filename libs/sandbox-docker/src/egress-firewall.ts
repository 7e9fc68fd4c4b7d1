import { CairnError } from '@cairn/contracts';
import { execFile, spawn } from 'node:child_process';
import { access } from 'node:fs/promises';
import { promisify } from 'node:util';

/*
 * The host side of an egress network. Docker's `--internal` bridge stops forwarding out of the
 * network, but not traffic to the host itself: a sandbox on it reaches every host service bound to
 * 0.0.0.0 or to the gateway (measured on engine 20.10, docs/sandbox-hardening.md). These rules, one
 * set per network and tagged with a comment naming the worker and the bridge, let the sandbox reach
 * exactly the proxy's port on the gateway, and nothing else on the host or beyond it.
 */

const run = promisify(execFile);
const COMMENT_PREFIX = 'cairn-egress';

export interface EgressRuleSet {
  workerId: string;
  /** The bridge interface of the network (`com.docker.network.bridge.name`). */
  bridge: string;
  gateway: string;
  proxyPort: number;
}

/** The comment every rule of one network carries. */
export function ruleComment(workerId: string, bridge: string): string {
  return `${COMMENT_PREFIX}:${workerId}:${bridge}`;
}

/** `(worker, bridge)` of a comment, or null when it is not one of ours. */
export function parseRuleComment(comment: string): { workerId: string; bridge: string } | null {
  const match = /^cairn-egress:([A-Za-z0-9][A-Za-z0-9_.-]{0,127}):([A-Za-z0-9_.-]{1,15})$/.exec(comment);
  return match?.[1] === undefined || match[2] === undefined ? null : { workerId: match[1], bridge: match[2] };
}

/**
 * The rules, as `iptables-restore --noflush` input (each `-I … 1` goes on top, so the last line
 * written is the first rule): from the bridge into the host only TCP to the proxy's port on the
 * gateway (other TCP reset at once, everything else dropped); nothing forwarded in or out of it;
 * for IPv6, nothing at all.
 */
export function egressRules(rules: EgressRuleSet): { v4: string; v6: string } {
  const { bridge, gateway, proxyPort } = rules;
  if (!/^[A-Za-z0-9_.-]{1,15}$/.test(bridge)) throw new RangeError(`not a bridge name: ${bridge}`);
  if (!/^[0-9]{1,3}(\.[0-9]{1,3}){3}$/.test(gateway)) throw new RangeError(`not an IPv4 gateway: ${gateway}`);
  if (!Number.isInteger(proxyPort) || proxyPort < 1 || proxyPort > 65_535) throw new RangeError(`not a port: ${proxyPort}`);
  const tag = `-m comment --comment ${ruleComment(rules.workerId, bridge)}`;
  const v4 = [
    '*filter',
    `-I INPUT 1 -i ${bridge} ${tag} -j DROP`,
    `-I INPUT 1 -i ${bridge} -p tcp ${tag} -j REJECT --reject-with tcp-reset`,
    `-I INPUT 1 -i ${bridge} -d ${gateway}/32 -p tcp -m tcp --dport ${proxyPort} ${tag} -j ACCEPT`,
    `-I FORWARD 1 -o ${bridge} ${tag} -j DROP`,
    `-I FORWARD 1 -i ${bridge} ${tag} -j DROP`,
    `-I FORWARD 1 -i ${bridge} -p tcp ${tag} -j REJECT --reject-with tcp-reset`,
    'COMMIT',
    '',
  ];
  const v6 = ['*filter', `-I INPUT 1 -i ${bridge} ${tag} -j DROP`, `-I FORWARD 1 -o ${bridge} ${tag} -j DROP`, `-I FORWARD 1 -i ${bridge} ${tag} -j DROP`, 'COMMIT', ''];
  return { v4: v4.join('\n'), v6: v6.join('\n') };
}

/** The rules of `iptables-save` (or `iptables -S`) output whose comment is one of ours, as `-D` lines. */
export function ourRules(listing: string): { comment: string; deleteLine: string }[] {
  const out: { comment: string; deleteLine: string }[] = [];
  for (const line of listing.split('\n')) {
    const match = /^-A (\S+) (.*--comment (\S+).*)$/.exec(line.trim());
    if (match?.[1] === undefined || match[2] === undefined || match[3] === undefined) continue;
    const comment = match[3].replace(/^"|"$/g, '');
    if (parseRuleComment(comment) === null) continue;
    out.push({ comment, deleteLine: `-D ${match[1]} ${match[2]}` });
  }
  return out;
}

/** The `-D` lines that take back exactly what `egressRules` put in. */
export function egressRuleDeletions(rules: EgressRuleSet): { v4: string; v6: string } {
  const undo = (text: string) => text.replace(/^-I (INPUT|FORWARD) 1 /gm, '-D $1 ');
  const { v4, v6 } = egressRules(rules);
  return { v4: undo(v4), v6: undo(v6) };
}

/** Installs and removes the rules of egress networks; see `IptablesFirewall`. */
export interface EgressFirewall {
  install(rules: EgressRuleSet): Promise<void>;
  /** Takes back what `install(rules)` put in; rules already gone are fine. */
  uninstall(rules: EgressRuleSet): Promise<void>;
  /** Removes every rule whose comment is in `comments`; rules already gone are fine. */
  remove(comments: readonly string[]): Promise<void>;
  /** The comments of this worker's rules present now. */
  list(workerId: string): Promise<string[]>;
}

interface Family {
  name: 'IPv4' | 'IPv6';
  save: string;
  restore: string;
}

const SEARCH_PATH = ['/usr/sbin', '/sbin', '/usr/bin', '/bin'];

async function findTool(name: string): Promise<string | null> {
  for (const dir of [...(process.env.PATH ?? '').split(':').filter((d) => d.startsWith('/')), ...SEARCH_PATH]) {
    const path = `${dir}/${name}`;
    if (await access(path).then(() => true, () => false)) return path;
  }
  return null;
}

function restore(binary: string, input: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['--noflush', '--wait', '10'], { stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      if (stderr.length < 4096) stderr += chunk;
    });
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`${binary} exited ${code}: ${stderr.trim()}`))));
    child.stdin.end(input);
  });
}

/**
 * The rules through the host's `iptables-restore` (one call per address family and change, so a
 * set is installed whole or not at all). Needs root (CAP_NET_ADMIN). IPv6 rules are installed when
 * the kernel has IPv6; when it has and `ip6tables` fails, the install fails — fail closed.
 */
export class IptablesFirewall implements EgressFirewall {
  private families: Promise<Family[]> | null = null;

  private async tools(): Promise<Family[]> {
    this.families ??= (async () => {
      const families: Family[] = [];
      const [saveV4, restoreV4] = await Promise.all([findTool('iptables-save'), findTool('iptables-restore')]);
      if (saveV4 === null || restoreV4 === null) throw new CairnError('E_RUNTIME_ABSENT', 'iptables is not installed: the egress firewall cannot be set up');
      families.push({ name: 'IPv4', save: saveV4, restore: restoreV4 });
      const ipv6 = await access('/proc/net/if_inet6').then(() => true, () => false);
      if (ipv6) {
        const [saveV6, restoreV6] = await Promise.all([findTool('ip6tables-save'), findTool('ip6tables-restore')]);
        if (saveV6 === null || restoreV6 === null) throw new CairnError('E_RUNTIME_ABSENT', 'the kernel has IPv6 but ip6tables is not installed: the egress firewall cannot be set up');
        families.push({ name: 'IPv6', save: saveV6, restore: restoreV6 });
      }
      return families;
    })();
    this.families.catch(() => {
      this.families = null;
    });
    return this.families;
  }

  async install(rules: EgressRuleSet): Promise<void> {
    const families = await this.tools();
    const text = egressRules(rules);
    const done: string[] = [];
    try {
      for (const family of families) {
        await restore(family.restore, family.name === 'IPv4' ? text.v4 : text.v6);
        done.push(family.name);
      }
    } catch (error) {
      // Half a rule set is no rule set: take back what went in.
      if (done.length > 0) await this.remove([ruleComment(rules.workerId, rules.bridge)]).catch(() => undefined);
      throw new CairnError('E_SANDBOX_START', `the egress firewall could not be installed: ${error instanceof Error ? error.message : String(error)}`, { bridge: rules.bridge });
    }
  }

  async uninstall(rules: EgressRuleSet): Promise<void> {
    const text = egressRuleDeletions(rules);
    for (const family of await this.tools()) {
      // All at once when every rule is still there (the usual teardown); else rule by rule as listed.
      const done = await restore(family.restore, family.name === 'IPv4' ? text.v4 : text.v6).then(() => true, () => false);
      if (!done) await this.removeFrom(family, new Set([ruleComment(rules.workerId, rules.bridge)]));
    }
  }

  async remove(comments: readonly string[]): Promise<void> {
    if (comments.length === 0) return;
    const wanted = new Set(comments);
    for (const family of await this.tools()) await this.removeFrom(family, wanted);
  }

  private async removeFrom(family: Family, wanted: ReadonlySet<string>): Promise<void> {
    // Listed again on a failed delete: a concurrent reconcile may have taken some rules already.
    for (let attempt = 0; ; attempt++) {
      const lines = (await this.listRules(family)).filter((rule) => wanted.has(rule.comment)).map((rule) => rule.deleteLine);
      if (lines.length === 0) return;
      try {
        await restore(family.restore, ['*filter', ...lines, 'COMMIT', ''].join('\n'));
        return;
      } catch (error) {
        if (attempt >= 2) throw new CairnError('E_INTERNAL', `the egress firewall rules could not be removed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }

  async list(workerId: string): Promise<string[]> {
    const comments = new Set<string>();
    for (const family of await this.tools()) {
      for (const rule of await this.listRules(family)) if (parseRuleComment(rule.comment)?.workerId === workerId) comments.add(rule.comment);
    }
    return [...comments];
  }

  private async listRules(family: Family): Promise<{ comment: string; deleteLine: string }[]> {
    const { stdout } = await run(family.save, ['-t', 'filter'], { maxBuffer: 64 * 1024 * 1024 });
    return ourRules(stdout).filter((rule) => /^-D (INPUT|FORWARD) /.test(rule.deleteLine));
  }
}
