import { isolatedNames, tlogNamesFor } from '@cairn/config';
import { uniqueName } from '@cairn/testing';
import { TransparencyLog } from '@cairn/tlog';
import { generateSigner, signCheckpoint, signSealStatement, utf8 } from '@cairn/transparency';
import type { SealStatement } from '@cairn/transparency';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';

/*
 * What a seal costs on top of its append since the log of seal heads (issue 20): the grader's
 * Ed25519 signature of the seal statement, the leaf append (two compare-and-sets on one publish),
 * a checkpoint (root, signature, compare-and-set in KV) — each timed alone on the bench's NATS — and,
 * on the stack the bench measured, how long after each seal its leaf was stored.
 */

export interface SealLogCost {
  /** Median of the statement's Ed25519 signature (WebCrypto), ms. */
  signMs: number;
  /** Median of one leaf append to a log of the bench's own, ms. */
  appendMs: number;
  /** Median of one checkpoint signed and stored, ms. */
  checkpointMs: number;
  /** Seal stored → leaf stored, per run of the stack (JetStream's timestamps), ms. */
  sealToLeafMs: number[];
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length === 0 ? Number.NaN : sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** JetStream's RFC 3339 timestamp with nanoseconds, as ms since the epoch with the fraction kept. */
function preciseMs(timestamp: string): number {
  const match = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(timestamp);
  if (match === null) return Date.parse(timestamp);
  const fraction = Number(`0.${match[2] ?? '0'}`) * 1000;
  return Date.parse(`${match[1]}${match[3]}`) + fraction;
}

async function timed(count: number, task: (i: number) => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    await task(i);
    times.push(performance.now() - t0);
  }
  return median(times);
}

export async function measureSealLog(natsUrl: string, stackId: string, runIds: readonly string[]): Promise<SealLogCost> {
  const { signer } = await generateSigner('cairn/bench');
  const statement = (i: number): SealStatement => ({ chainId: `run_bench${i}`, headSeq: 12, headHash: 'a'.repeat(64), evidenceDigest: 'a'.repeat(64), finalState: 'SEALED' });
  const signMs = await timed(500, (i) => signSealStatement(statement(i), signer));

  const nc = await connect({ servers: natsUrl });
  const stream = uniqueName('BENCH_TLOG').toUpperCase();
  const names = { stream, subjectPrefix: uniqueName('bench_tlog').toLowerCase(), checkpointBucket: `${stream}_CP` };
  const jsm = await jetstreamManager(nc);
  try {
    const log = await TransparencyLog.open(nc, names, 'writer');
    const appendMs = await timed(200, (i) => log.appendLeaf(`run_bench${i}`, utf8(`cairn.seal/v1\nchain run_bench${i}\n`)));
    let extra = 0;
    const checkpointMs = await timed(20, async () => {
      await log.appendLeaf(`run_extra${extra++}`, utf8('one more\n'));
      const tree = await log.currentTree();
      await log.storeCheckpoint(await signCheckpoint(tree.size, await tree.root(), signer));
    });
    log.close();

    // The stack's own seals and leaves.
    const evidence = isolatedNames(stackId);
    const tlog = tlogNamesFor(evidence.CAIRN_EVIDENCE_STREAM, evidence.CAIRN_EVIDENCE_SUBJECT_PREFIX);
    const sealToLeafMs: number[] = [];
    for (const runId of runIds) {
      const seal = await jsm.direct.getMessage(evidence.CAIRN_EVIDENCE_STREAM, { last_by_subj: `${evidence.CAIRN_EVIDENCE_SUBJECT_PREFIX}.${runId}.run.sealed` });
      const leaf = await jsm.direct.getMessage(tlog.stream, { last_by_subj: `${tlog.subjectPrefix}.leaf.${runId}` });
      if (seal !== null && leaf !== null) sealToLeafMs.push(preciseMs(leaf.timestamp) - preciseMs(seal.timestamp));
    }
    return { signMs, appendMs, checkpointMs, sealToLeafMs };
  } finally {
    await jsm.streams.delete(names.stream).catch(() => false);
    await jsm.streams.delete(`KV_${names.checkpointBucket}`).catch(() => false);
    await nc.close();
  }
}

export function formatSealLog(cost: SealLogCost): string {
  const sorted = [...cost.sealToLeafMs].sort((a, b) => a - b);
  const p90 = sorted[Math.min(sorted.length - 1, Math.ceil(0.9 * sorted.length) - 1)] ?? Number.NaN;
  return [
    'signed seals and the log of seal heads (per seal, each timed alone)',
    `  seal statement signed (Ed25519)   median ${(cost.signMs * 1000).toFixed(0).padStart(5)} µs`,
    `  leaf appended (CAS, one publish)  median ${cost.appendMs.toFixed(2).padStart(6)} ms`,
    `  checkpoint signed and stored      median ${cost.checkpointMs.toFixed(2).padStart(6)} ms   (every CAIRN_TLOG_CHECKPOINT_INTERVAL_MS, or on demand; not per seal)`,
    `  seal stored → its leaf stored     median ${median(cost.sealToLeafMs).toFixed(1).padStart(6)} ms   p90 ${p90.toFixed(1)} ms   (${cost.sealToLeafMs.length} runs of the stack; after the seal, off the run's path)`,
  ].join('\n');
}
