import { CairnError, parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import { PeriodicTask } from '@cairn/service-kit';
import type { JsonLogger } from '@cairn/service-kit';
import type { StoredCheckpoint, TransparencyLog } from '@cairn/tlog';
import { bytesEqual, sealOfReceipt, sealStatementText, signCheckpoint, utf8 } from '@cairn/transparency';
import type { NoteSigner } from '@cairn/transparency';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';

/** The grader's log of seal heads, or null when it seals unsigned (no key: no log). */
export const SEAL_LOG = Symbol('SEAL_LOG');

/*
 * The grader's half of the log of seal heads (ADR 0020): each `run.sealed` it is delivered — its
 * own seals, delivered back like every receipt — becomes the chain's leaf (the seal statement's
 * text), once; a crash between the seal and its leaf is healed by the redelivery of the seal, and
 * seals from before the log by the catch-up at boot. It alone holds the key, so it alone signs
 * checkpoints: at an interval when the tree grew, and when a reader asks. It never signs a tree
 * that does not extend the last checkpoint.
 */
export class SealLog {
  private readonly task: PeriodicTask;
  private subscription: Subscription | null = null;
  private signing: Promise<StoredCheckpoint> | null = null;
  /** Seal to leaf (ms), of this process's appends: what `bench:runs` prints. */
  private readonly appendTimes: number[] = [];

  constructor(
    private readonly log: TransparencyLog,
    private readonly signer: NoteSigner,
    private readonly logger: JsonLogger,
    intervalMs: number,
  ) {
    this.task = new PeriodicTask(intervalMs, () => this.checkpoint(), (error) => this.logger.write('error', 'could not publish a checkpoint', { error: String(error) }));
  }

  start(): void {
    this.subscription = this.log.serveCheckpointRequests(async () => (await this.checkpoint()).note);
    this.task.start();
  }

  async stop(): Promise<void> {
    this.subscription?.unsubscribe();
    await this.task.stop();
    this.log.close();
  }

  /** The seal's leaf, appended once (a redelivery finds it and stores nothing). */
  async append(seal: EvidenceReceipt): Promise<void> {
    const of = sealOfReceipt(seal);
    if (of.kind === 'not_sealed') return;
    const started = performance.now();
    const { index, duplicate } = await this.log.appendLeaf(seal.run_id, utf8(sealStatementText(of.statement)));
    if (!duplicate) this.appendTimes.push(performance.now() - started);
    this.logger.write('info', duplicate ? 'seal in the log already' : 'seal appended to the log', { chain_id: seal.run_id, leaf_index: index });
  }

  /**
   * A checkpoint of the tree as it is now: the stored one when the tree has not grown since, else
   * a new one signed — only when the tree extends the stored one (same root at its size).
   */
  checkpoint(): Promise<StoredCheckpoint> {
    // One signing at a time: a request arriving mid-signing gets that checkpoint.
    this.signing ??= this.signNow().finally(() => {
      this.signing = null;
    });
    return this.signing;
  }

  private async signNow(): Promise<StoredCheckpoint> {
    const latest = await this.log.latestCheckpoint();
    const tree = await this.log.currentTree(latest?.checkpoint.size ?? 0).catch(async (error: unknown) => {
      // Fewer leaves than the last checkpoint signed: the log lost leaves (a stream made anew, smaller).
      const now = await this.log.currentTree();
      if (latest !== null && now.size < latest.checkpoint.size) {
        this.logger.write('fatal', 'the log holds fewer leaves than its last checkpoint: not signing', { stream: this.log.streamName, leaves: now.size, checkpoint_size: latest.checkpoint.size });
        throw new CairnError('E_CHAIN_BROKEN', `the log ${this.log.streamName} holds ${now.size} leaves, its last checkpoint signed ${latest.checkpoint.size}: no checkpoint is signed over it`);
      }
      throw error;
    });
    if (latest !== null) {
      if (!bytesEqual(await tree.root(latest.checkpoint.size), latest.checkpoint.rootHash)) {
        this.logger.write('fatal', 'the log does not extend its last checkpoint: not signing', { stream: this.log.streamName, checkpoint_size: latest.checkpoint.size });
        throw new CairnError('E_CHAIN_BROKEN', `the log ${this.log.streamName} does not extend its last checkpoint (size ${latest.checkpoint.size}): it was rewritten; no checkpoint is signed over it`);
      }
      if (tree.size === latest.checkpoint.size) return latest;
    }
    const note = await signCheckpoint(tree.size, await tree.root(), this.signer);
    const stored = await this.log.storeCheckpoint(note);
    this.logger.write('info', 'checkpoint signed', { size: stored.checkpoint.size });
    return stored;
  }

  /** The times (ms) of the leaf appends this process made, and forgets them. */
  takeAppendTimes(): number[] {
    return this.appendTimes.splice(0);
  }

  /**
   * Appends the leaf of every sealed chain that has none: seals from before the log (the grader's
   * consumer had passed them). Sealed chains come from the evidence stream's subject index
   * (`<prefix>.*.run.sealed`), each seal read with a direct get, appended in stream order.
   */
  async catchUp(nc: NatsConnection, evidence: EvidenceLog): Promise<number> {
    const jsm = await jetstreamManager(nc);
    const prefix = evidence.subjectPrefix;
    const info = await jsm.streams.info(evidence.streamName, { subjects_filter: `${prefix}.*.run.sealed` });
    const sealed = Object.keys(info.state.subjects ?? {}).map((subject) => subject.slice(prefix.length + 1, -'.run.sealed'.length));
    const logged = await this.log.chainsWithLeaves();
    const missing: { seq: number; receipt: EvidenceReceipt }[] = [];
    for (const chainId of sealed.filter((c) => !logged.has(c))) {
      const stored = await jsm.direct.getMessage(evidence.streamName, { last_by_subj: `${prefix}.${chainId}.run.sealed` });
      if (stored === null) continue;
      const parsed = parseEvidenceReceipt(stored.json<unknown>());
      if (!parsed.ok || parsed.receipt.type !== 'run.sealed' || parsed.receipt.run_id !== chainId) {
        this.logger.write('warn', 'not logging a seal that does not validate', { chain_id: chainId, stream_seq: stored.seq });
        continue;
      }
      missing.push({ seq: stored.seq, receipt: parsed.receipt });
    }
    missing.sort((a, b) => a.seq - b.seq);
    for (const { receipt } of missing) await this.append(receipt);
    return missing.length;
  }
}
