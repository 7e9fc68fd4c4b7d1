import { whileLeaderless } from '@cairn/config';
import { CairnError } from '@cairn/contracts';
import { EvidenceLog, evidenceLogOptionsFromConfig, evidenceSubjects } from '@cairn/evidence-log';
import { AckPolicy, DeliverPolicy, jetstreamManager, JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { Consumer, ConsumerConfig, ConsumerInfo, JetStreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import type { ProjectorConfig } from './projector.config.js';

/**
 * The projector's durable pull consumer on the evidence stream: every subject under the prefix,
 * from the first message, explicit acks. Creates the stream (through the evidence log, with its
 * append-only config) and the consumer when missing; refuses a consumer or a stream that would
 * break the projector's assumptions.
 */
export async function openEvidenceConsumer(nc: NatsConnection, config: ProjectorConfig): Promise<{ consumer: Consumer; log: EvidenceLog }> {
  const stream = config.CAIRN_EVIDENCE_STREAM;
  const filter = evidenceSubjects(config.CAIRN_EVIDENCE_SUBJECT_PREFIX);
  const log = await EvidenceLog.fromConnection(nc, evidenceLogOptionsFromConfig(config, { appends: new Set() }));
  const jsm = await jetstreamManager(nc);

  // The writer only moves its position over consecutive stream seqs, so every message of the
  // stream must be ours: a stream that also holds other subjects would stall it.
  const subjects = (await whileLeaderless(() => jsm.streams.info(stream))).config.subjects ?? [];
  if (subjects.length !== 1 || subjects[0] !== filter) {
    throw new CairnError('E_CONFLICT', `stream ${stream} holds subjects ${JSON.stringify(subjects)}; the projector needs exactly ["${filter}"]`);
  }

  const durable = config.CAIRN_PROJECTOR_DURABLE;
  const wanted: Partial<ConsumerConfig> = {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    filter_subject: filter,
    ack_wait: nanos(config.CAIRN_PROJECTOR_ACK_WAIT_MS),
    max_ack_pending: config.CAIRN_PROJECTOR_BATCH_SIZE * 4,
    max_deliver: -1,
  };
  const existing = await consumerInfo(jsm, stream, durable);
  if (existing === null) {
    await whileLeaderless(() => jsm.consumers.add(stream, wanted));
  } else {
    const { filter_subject: has, ack_policy: ack, deliver_policy: deliver } = existing.config;
    if (has !== filter || ack !== AckPolicy.Explicit || deliver !== DeliverPolicy.All) {
      throw new CairnError(
        'E_CONFLICT',
        `consumer ${durable} on ${stream} is ${JSON.stringify({ filter_subject: has, ack_policy: ack, deliver_policy: deliver })}, not what the projector needs`,
      );
    }
    if (existing.config.ack_wait !== wanted.ack_wait || existing.config.max_ack_pending !== wanted.max_ack_pending) {
      await whileLeaderless(() => jsm.consumers.update(stream, durable, { ack_wait: wanted.ack_wait, max_ack_pending: wanted.max_ack_pending }));
    }
  }
  return { consumer: await whileLeaderless(() => jsm.jetstream().consumers.get(stream, durable)), log };
}

async function consumerInfo(jsm: JetStreamManager, stream: string, durable: string): Promise<ConsumerInfo | null> {
  try {
    return await whileLeaderless(() => jsm.consumers.info(stream, durable));
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound) return null;
    throw error;
  }
}
