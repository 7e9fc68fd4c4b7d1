import { z } from 'zod';

/** Replicas of every stream, KV bucket and object store Cairn creates when CAIRN_NATS_REPLICAS is unset: one node. */
export const DEFAULT_NATS_REPLICAS = 1;

/**
 * CAIRN_NATS_REPLICAS: how many servers hold each of Cairn's streams, KV buckets and object stores —
 * 1 on one node, 3 on a three-node cluster (5 on five). An even count is refused: it needs as large a
 * quorum as the odd count above it and survives no more failures than the one below
 * (docs/adr/0014-durable-by-default.md).
 */
export const NatsReplicasSchema = z.coerce
  .number()
  .int('CAIRN_NATS_REPLICAS is a whole number')
  .refine((n): boolean => n === 1 || n === 3 || n === 5, 'CAIRN_NATS_REPLICAS is 1 (one node), 3 or 5 (a cluster of at least that many)')
  .default(DEFAULT_NATS_REPLICAS);

/**
 * Why the stream `stream` (a KV bucket's is `KV_<bucket>`), which exists with `found` replicas,
 * cannot serve with `wanted` — naming the field, the setting and both ways to reconcile them — or
 * null when it can. Fewer replicas survive fewer failures; more refuse writes once a node the setting
 * does not count on is down: either way the one setting would not be the truth.
 */
export function replicasProblem(stream: string, found: number | undefined, wanted: number): string | null {
  // A server that leaves the field out means one.
  const replicas = found ?? 1;
  if (replicas === wanted) return null;
  return `num_replicas is ${replicas}, not the ${wanted} CAIRN_NATS_REPLICAS asks for (scale it with \`nats stream edit ${stream} --replicas ${wanted}\`, or set CAIRN_NATS_REPLICAS=${replicas})`;
}

/** JetStream's answers to a create whose replicas the servers cannot place: not clustered (10074), too few peers (10005, 10023). */
const UNPLACEABLE = new Set([10074, 10005, 10023]);

/** What to add to a refused create of `wanted` replicas, when the refusal says the cluster is too small; '' otherwise. */
export function replicasHint(errCode: number | undefined, wanted: number): string {
  if (errCode === undefined || !UNPLACEABLE.has(errCode)) return '';
  return wanted === 1
    ? ''
    : ` (CAIRN_NATS_REPLICAS is ${wanted}: the NATS server must be a JetStream cluster of at least ${wanted} nodes, deploy/nats/cluster/)`;
}

/**
 * How long each pull of a durable consumer lasts (the client's idle heartbeat is half of it). When a
 * consumer's leader dies in a cluster, the pull it held is lost without a word, and the client pulls
 * again only after two missed heartbeats: 5 s with this, 30 s with the client's default.
 */
export const CONSUMER_PULL_EXPIRES_MS = 5_000;

/**
 * How long a Cairn process keeps asking JetStream while a cluster cannot answer: a stream or
 * consumer that lost its leader (or was just created) answers nobody until its group elects one —
 * about 5 s here after a leader is killed.
 */
export const LEADERLESS_WAIT_MS = 10_000;

/**
 * Whether `error` is a JetStream request a cluster could not answer yet — a timeout, no responders,
 * JetStream busy, or too few peers known to place a stream (a cluster just started): one that a
 * leader election, or a peer joining, ends.
 */
export function isLeaderless(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return error.name === 'TimeoutError' || /^timeout$|jetstream is not enabled|no responders|temporarily unavailable|no suitable peers/i.test(error.message);
}

/**
 * Runs `request` again, with a short jittered pause, while it fails as a leaderless cluster makes it
 * fail ({@link isLeaderless}), for up to {@link LEADERLESS_WAIT_MS}; then, or on any other error, throws it.
 */
export async function whileLeaderless<T>(request: () => Promise<T>, waitMs: number = LEADERLESS_WAIT_MS): Promise<T> {
  const until = Date.now() + waitMs;
  for (;;) {
    try {
      return await request();
    } catch (error) {
      if (!isLeaderless(error) || Date.now() >= until) throw error;
      await new Promise((resolve) => setTimeout(resolve, 150 + Math.random() * 200));
    }
  }
}
