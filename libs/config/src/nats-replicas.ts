import { z } from 'zod';

/** Replicas of every stream, KV bucket and object store Cairn creates when CAIRN_NATS_REPLICAS is unset: one node. */
export const DEFAULT_NATS_REPLICAS = 1;

/**
 * CAIRN_NATS_REPLICAS: how many servers hold each of Cairn's streams, KV buckets and object stores —
 * 1 on one node, 3 on a three-node cluster (5 on five). An even count is refused: it needs as large a
 * quorum as the odd count above it and survives no more failures than the one below (docs/adr/0013).
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
