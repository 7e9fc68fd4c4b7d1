import { NATS_SERVICES, SERVICE_ROUTES, STACK_BUCKETS } from './service-routes.js';
import type { NatsService, StackBucket } from './service-routes.js';

/*
 * Each service's NATS user, derived from its row of SERVICE_ROUTES and the stack's names
 * (docs/adr/0022). Only allows: nats-server denies whatever a user's allow list does not match.
 * The JetStream API subjects are the server's (`$JS.API.STREAM.INFO.<stream>`,
 * `$JS.API.CONSUMER.CREATE.<stream>.<consumer>[.<filter>]`, `$JS.API.CONSUMER.DURABLE.CREATE.<stream>.<durable>`,
 * `$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`, `$JS.API.DIRECT.GET.<stream>[.<subject>]`, acks on
 * `$JS.ACK.<stream>.<consumer>.>`, flow control on `$JS.FC.<stream>.<consumer>.<id>`); no service may
 * create, update, delete or purge a stream: `cairn up` makes them with the operator's user first, since
 * a stream a service could configure could republish into the evidence subjects.
 */

/** The names a stack's users are scoped to (what the services' CAIRN_* settings resolve to). */
export interface StackNatsNames {
  evidenceStream: string;
  /** `<prefix>.<chain id>.<type>` (CAIRN_EVIDENCE_SUBJECT_PREFIX). */
  evidencePrefix: string;
  commandStream: string;
  /** `<prefix>.cmd.<verb>` (CAIRN_COMMAND_SUBJECT_PREFIX). */
  commandPrefix: string;
  buckets: Record<StackBucket, string>;
  /** The artifact object store's bucket (CAIRN_ARTIFACT_BUCKET); its stream is `OBJ_<bucket>`. */
  artifactBucket: string;
  /** The log of seal heads: its stream, its subjects' prefix, its checkpoints' bucket (tlogNames). */
  tlog: { stream: string; subjectPrefix: string; checkpointBucket: string };
  /** The runtime worker the runtime's user is for: its durables carry the id. */
  workerId: string;
}

export interface SubjectPermission {
  allow: string[];
  deny: string[];
}

export interface NatsPermissions {
  publish: SubjectPermission;
  subscribe: SubjectPermission;
}

/** `.` may not be in a consumer name, and a worker id may hold it (as the runtime names its durables). */
function consumerToken(id: string): string {
  return id.replace(/\./g, '_');
}

/** The durable consumer `service` reads the evidence stream with (the services' defaults). */
export function evidenceDurableOf(service: NatsService, workerId: string): string {
  return service === 'runtime' ? `cairn-runtime-${consumerToken(workerId)}` : `cairn-${service}`;
}

/**
 * The durable `service` serves `verb` with: intake's are `cairn-intake-<verb>` (CAIRN_INTAKE_DURABLE_PREFIX's
 * default), the webhooks service's `cairn-webhooks-cmd-<verb>` (never one of its evidence durables, `cairn-webhooks-<digest>`).
 */
export function commandDurableOf(verb: string, service: NatsService = 'intake'): string {
  const name = verb.replace(/_/g, '-');
  return service === 'intake' ? `cairn-intake-${name}` : `cairn-${service}-cmd-${name}`;
}

/**
 * The prefix of every inbox `service`'s connections make (nats.js `inboxPrefix`): its user may
 * subscribe to no other inbox, so no service reads another's replies. A worker's is its own
 * (`_INBOX_runtime.<worker>`), so one worker does not read another's either.
 */
export function natsInboxPrefix(service: NatsService, workerId: string): string {
  return service === 'runtime' ? `_INBOX_runtime.${consumerToken(workerId)}` : `_INBOX_${service}`;
}

/** The kind of inbox a worker asks the gateway for a file's chunks on (`<worker's prefix>.chunks.<id>`). */
export const CHUNK_INBOX = 'chunks';

/** Every inbox of `service` (every worker's, for the runtime): what a service answering it may publish to. */
function inboxesOf(service: NatsService): string {
  return service === 'runtime' ? '_INBOX_runtime.>' : `_INBOX_${service}.>`;
}

/**
 * Whose inboxes `service` answers into, and only those: the senders of the commands it serves, the
 * senders of the sandbox ops its worker serves, the workers whose requests for a file's chunks the
 * gateway answers, and those who ask the log of seal heads' writer for a checkpoint.
 */
function answeredInboxes(service: NatsService): string[] {
  const route = SERVICE_ROUTES[service];
  const answered = new Set<NatsService>();
  for (const other of NATS_SERVICES) {
    const theirs = SERVICE_ROUTES[other];
    if (theirs.sends.some((verb) => route.serves.includes(verb))) answered.add(other);
    if (route.sandboxOps === 'serve' && theirs.sandboxOps === 'send') answered.add(other);
    if (route.imageBuilds === 'serve' && theirs.imageBuilds === 'send') answered.add(other);
    if (route.tlog === 'write' && theirs.tlog === 'read') answered.add(other);
  }
  answered.delete(service);
  const inboxes = [...answered].map(inboxesOf);
  // The gateway answers a worker's requests for a file's chunks, and nothing else of a worker's:
  // not the publish acks of the receipts it sees on the chains it watches.
  if (route.sandboxOps === 'send' || route.imageBuilds === 'send') inboxes.push(`_INBOX_runtime.*.${CHUNK_INBOX}.>`);
  return inboxes;
}

/** The worker's durable of its sandbox ops. */
export function sandboxOpsDurableOf(workerId: string): string {
  return `cairn-runtime-sbxop-${consumerToken(workerId)}`;
}

/** The worker's durable of its image builds (docs/adr/0038). */
export function imageBuildsDurableOf(workerId: string): string {
  return `cairn-runtime-imgbuild-${consumerToken(workerId)}`;
}

/** Everything a durable pull consumer's owner does with it: make it (or update its filters), read it, pull, ack. */
function durableGrants(stream: string, durable: string): string[] {
  return [
    `$JS.API.CONSUMER.INFO.${stream}.${durable}`,
    `$JS.API.CONSUMER.CREATE.${stream}.${durable}`,
    `$JS.API.CONSUMER.CREATE.${stream}.${durable}.>`,
    `$JS.API.CONSUMER.DURABLE.CREATE.${stream}.${durable}`,
    `$JS.API.CONSUMER.MSG.NEXT.${stream}.${durable}`,
    `$JS.ACK.${stream}.${durable}.>`,
  ];
}

/** Ordered consumers of the caller's own (random names): made, pulled or pushed, answered, removed. */
function orderedConsumerGrants(stream: string): string[] {
  return [
    `$JS.API.CONSUMER.CREATE.${stream}.*`,
    `$JS.API.CONSUMER.CREATE.${stream}.*.>`,
    `$JS.API.CONSUMER.INFO.${stream}.*`,
    `$JS.API.CONSUMER.MSG.NEXT.${stream}.*`,
    `$JS.API.CONSUMER.DELETE.${stream}.*`,
    `$JS.FC.${stream}.>`,
  ];
}

/** What a user with ordered-consumer grants on `stream` must still not touch: the stack's durables on it. */
function durableDenials(stream: string, durables: readonly string[]): string[] {
  return durables.flatMap((d) => [`$JS.API.CONSUMER.*.${stream}.${d}`, `$JS.API.CONSUMER.*.${stream}.${d}.>`, `$JS.API.CONSUMER.*.*.${stream}.${d}`]);
}

export function bucketStream(bucket: string): string {
  return `KV_${bucket}`;
}

function unique(subjects: readonly string[]): string[] {
  return [...new Set(subjects)];
}

/** The evidence durables of the whole stack: what `follows` users are kept off. */
function stackEvidenceDurables(names: StackNatsNames): string[] {
  return (Object.keys(SERVICE_ROUTES) as NatsService[]).filter((s) => SERVICE_ROUTES[s].evidence === 'durable' || SERVICE_ROUTES[s].evidence === 'routed').map((s) => evidenceDurableOf(s, names.workerId));
}

/** The NATS permissions of `service`'s user on the stack named by `names`. */
export function natsPermissionsFor(service: NatsService, names: StackNatsNames): NatsPermissions {
  const route = SERVICE_ROUTES[service];
  const ev = names.evidenceStream;
  const cmd = names.commandStream;
  const publish: string[] = ['$JS.API.INFO'];
  const publishDeny: string[] = [];
  const subscribe: string[] = [`${natsInboxPrefix(service, names.workerId)}.>`];

  // The evidence stream: every service reads chains; only its own types may it publish.
  publish.push(`$JS.API.STREAM.INFO.${ev}`, `$JS.API.DIRECT.GET.${ev}`, `$JS.API.DIRECT.GET.${ev}.>`);
  if (route.evidence === 'durable') publish.push(...durableGrants(ev, evidenceDurableOf(service, names.workerId)));
  if (route.evidence === 'routed') {
    // Durables of any name (the webhooks service names them for the types in force, ADR 0024), listed
    // to find its own, and acked; never another service's durable, nor its acks.
    const others = stackEvidenceDurables(names).filter((d) => d !== evidenceDurableOf(service, names.workerId));
    publish.push(...orderedConsumerGrants(ev), `$JS.API.CONSUMER.DURABLE.CREATE.${ev}.*`, `$JS.API.CONSUMER.LIST.${ev}`, `$JS.API.CONSUMER.NAMES.${ev}`, `$JS.ACK.${ev}.*.>`);
    publishDeny.push(...durableDenials(ev, others), ...others.map((d) => `$JS.ACK.${ev}.${d}.>`));
  }
  if ((route.folds ?? []).length > 0 && route.evidence !== 'follows' && route.evidence !== 'routed') {
    // Its own ordered consumer from the start of the log (a fold of its own state, ADR 0027), and never
    // another service's durable.
    const others = stackEvidenceDurables(names).filter((d) => d !== evidenceDurableOf(service, names.workerId));
    publish.push(...orderedConsumerGrants(ev));
    publishDeny.push(...durableDenials(ev, others));
  }
  if (route.evidence === 'follows') {
    publish.push(...orderedConsumerGrants(ev));
    publishDeny.push(...durableDenials(ev, stackEvidenceDurables(names)));
  }
  for (const type of route.appends) publish.push(`${names.evidencePrefix}.*.${type}`);
  if (route.watchesChains) subscribe.push(`${names.evidencePrefix}.>`);

  // Commands: the work queue, and answers on the sender's reply inbox.
  const commands = route.sends.length > 0 || route.serves.length > 0 || route.sandboxOps !== 'none' || route.imageBuilds !== undefined;
  if (commands) publish.push(`$JS.API.STREAM.INFO.${cmd}`);
  for (const verb of route.sends) publish.push(`${names.commandPrefix}.cmd.${verb}`);
  for (const verb of route.serves) publish.push(...durableGrants(cmd, commandDurableOf(verb, service)));
  if (route.sandboxOps === 'send') publish.push(`${names.commandPrefix}.cmd.sbxop.*`);
  if (route.sandboxOps === 'serve') publish.push(...durableGrants(cmd, sandboxOpsDurableOf(names.workerId)));
  if (route.imageBuilds === 'send') publish.push(`${names.commandPrefix}.cmd.imgbuild.*`);
  if (route.imageBuilds === 'serve') publish.push(...durableGrants(cmd, imageBuildsDurableOf(names.workerId)));
  // A command's reply subject travels in a header, so answering it is a publish, not a NATS response;
  // the gateway answers a worker's requests for a file's chunks the same way. Only into the inboxes
  // of those it answers (`answeredInboxes`), and never a forged answer into anyone else's.
  publish.push(...answeredInboxes(service));

  for (const bucket of STACK_BUCKETS) {
    const access = route.buckets[bucket];
    if (access === undefined) continue;
    const name = names.buckets[bucket];
    const stream = bucketStream(name);
    publish.push(`$JS.API.STREAM.INFO.${stream}`, `$JS.API.STREAM.MSG.GET.${stream}`, `$JS.API.DIRECT.GET.${stream}`, `$JS.API.DIRECT.GET.${stream}.>`, ...orderedConsumerGrants(stream));
    if (access === 'write') publish.push(`$KV.${name}.>`);
  }

  if (route.artifacts !== 'none') {
    const stream = `OBJ_${names.artifactBucket}`;
    // Opened, read chunk by chunk (a message get by subject), never created: `cairn up` makes it.
    publish.push(`$JS.API.STREAM.INFO.${stream}`, `$JS.API.STREAM.MSG.GET.${stream}`, `$JS.API.DIRECT.GET.${stream}`, `$JS.API.DIRECT.GET.${stream}.>`, ...orderedConsumerGrants(stream));
    // The runtime puts objects (chunks, then the meta rollup); a put that heals a bad object purges its old chunks.
    if (route.artifacts === 'write') publish.push(`$O.${names.artifactBucket}.>`, `$JS.API.STREAM.PURGE.${stream}`);
  }

  if (route.tlog !== 'none') {
    const { stream, subjectPrefix, checkpointBucket } = names.tlog;
    const kvStream = bucketStream(checkpointBucket);
    publish.push(`$JS.API.STREAM.INFO.${stream}`, `$JS.API.DIRECT.GET.${stream}`, `$JS.API.DIRECT.GET.${stream}.>`);
    publish.push(`$JS.API.STREAM.INFO.${kvStream}`, `$JS.API.STREAM.MSG.GET.${kvStream}`, `$JS.API.DIRECT.GET.${kvStream}`, `$JS.API.DIRECT.GET.${kvStream}.>`);
    if (route.tlog === 'write') {
      // A leaf per sealed chain, the checkpoints, and the answers to checkpoint requests (core NATS).
      publish.push(`${subjectPrefix}.leaf.*`, `$KV.${checkpointBucket}.>`);
      subscribe.push(`${subjectPrefix}.checkpoint.sign`);
    } else {
      publish.push(`${subjectPrefix}.checkpoint.sign`);
    }
  }

  if (route.monitors) {
    for (const stream of [ev, cmd, ...STACK_BUCKETS.map((b) => bucketStream(names.buckets[b]))]) {
      publish.push(`$JS.API.STREAM.INFO.${stream}`, `$JS.API.CONSUMER.LIST.${stream}`, `$JS.API.CONSUMER.NAMES.${stream}`);
    }
  }

  return { publish: { allow: unique(publish), deny: unique(publishDeny) }, subscribe: { allow: unique(subscribe), deny: [] } };
}

/** The operator's user (`cairn up`, `cairn log migrate`, exports): everything, as root on the broker would have. */
export const OPERATOR_PERMISSIONS: NatsPermissions = { publish: { allow: ['>'], deny: [] }, subscribe: { allow: ['>'], deny: [] } };

export interface NatsUser {
  /** Who it is for: a service, or `operator`. */
  name: string;
  /** The user's nkey (public, `U…`). */
  nkey: string;
  permissions: NatsPermissions;
}

function list(subjects: readonly string[], indent: string): string {
  return `[\n${subjects.map((s) => `${indent}  ${JSON.stringify(s)}`).join(',\n')}\n${indent}]`;
}

function permissionBlock(name: string, permission: SubjectPermission, indent: string): string {
  const lines = [`${indent}${name}: {`, `${indent}  allow: ${list(permission.allow, `${indent}  `)}`];
  if (permission.deny.length > 0) lines.push(`${indent}  deny: ${list(permission.deny, `${indent}  `)}`);
  lines.push(`${indent}}`);
  return lines.join('\n');
}

/**
 * The nats-server `authorization` block for `users`: nkeys only (the server holds no secret), one
 * user each with its allow lists. A server that includes it refuses a client without one of these keys.
 */
export function renderAuthorization(users: readonly NatsUser[], header: string): string {
  const entries = users.map((user) =>
    [
      `    # ${user.name}`,
      '    {',
      `      nkey: ${JSON.stringify(user.nkey)}`,
      '      permissions: {',
      permissionBlock('publish', user.permissions.publish, '        '),
      permissionBlock('subscribe', user.permissions.subscribe, '        '),
      '      }',
      '    }',
    ].join('\n'),
  );
  return `${header
    .split('\n')
    .map((line) => `# ${line}`.trimEnd())
    .join('\n')}\nauthorization {\n  users: [\n${entries.join(',\n')}\n  ]\n}\n`;
}

/** Whether the NATS subject pattern `pattern` (`*` one token, `>` the rest) covers `subject`. */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length) return false;
    if (p[i] !== '*' && p[i] !== s[i]) return false;
  }
  return p.length === s.length;
}

/** Whether a user with `permission` may publish (or subscribe to) `subject`: an allow covers it and no deny does. */
export function permits(permission: SubjectPermission, subject: string): boolean {
  return permission.allow.some((p) => subjectMatches(p, subject)) && !permission.deny.some((p) => subjectMatches(p, subject));
}
