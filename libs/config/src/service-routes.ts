import { COMMAND_VERBS, EVENT_TYPES } from '@cairn/contracts';
import type { CommandVerb, EventType } from '@cairn/contracts';

/*
 * Who does what on NATS, one row per service: the receipt types it appends, the commands it sends
 * or serves, the buckets it reads or writes, and how it reads the evidence stream. Each service's
 * NATS user is derived from its row (nats-permissions.ts, docs/adr/0022), and each service's
 * evidence log refuses to append a type its row does not name, so a row that falls behind what
 * the service does fails its tests before it fails under a server that enforces it.
 */

/** Every process of a stack that connects to NATS (the MCP gateway is a REST client and does not). */
export const NATS_SERVICES = ['intake', 'policy', 'scheduler', 'runtime', 'kernel', 'verifier', 'grader', 'projector', 'webhooks', 'gateway'] as const;
export type NatsService = (typeof NATS_SERVICES)[number];

export function isNatsService(name: string): name is NatsService {
  return (NATS_SERVICES as readonly string[]).includes(name);
}

/** The buckets of a stack: the operational ones (`@cairn/operational`, the scheduler's approval deadlines, operators' drains) and the secret catalog (ADR 0028). */
export const STACK_BUCKETS = ['workers', 'leases', 'approvals', 'queue', 'drains', 'secrets'] as const;
export type StackBucket = (typeof STACK_BUCKETS)[number];

/** `read`: get, list and watch; `write`: that and put and delete. */
export type BucketAccess = 'read' | 'write';

export interface ServiceRoute {
  /** The receipt types it appends to the evidence stream; nothing else may it publish there. */
  appends: readonly EventType[];
  /**
   * How it reads the evidence stream: `durable` — its own durable consumer (`cairn-<service>`, the
   * runtime's `cairn-runtime-<worker id>`) and batch direct gets of chains; `reads` — direct gets
   * only; `follows` — direct gets and short-lived ordered consumers of one chain (the gateway's
   * sandbox reads); `routed` — durables of its own named for the types in force
   * (`cairn-webhooks-<digest>`, ADR 0024), made and removed as they change, and chain reads.
   */
  evidence: 'durable' | 'reads' | 'follows' | 'routed';
  /**
   * Receipt types it folds state of its own from, with an ordered consumer of its own from the start
   * of the log (policy's usage ledger, docs/adr/0027); none: it makes no ordered consumer of the stream.
   */
  folds?: readonly EventType[];
  /** Core subscriptions to a chain's subjects (the runtime's cancel watch, the gateway's SSE wake-ups). */
  watchesChains: boolean;
  /** The commands it publishes to the command stream (and whose replies it awaits). */
  sends: readonly CommandVerb[];
  /** The commands it takes from the command stream with its own durables, answering each. */
  serves: readonly CommandVerb[];
  /** Sandbox operations (`<prefix>.cmd.sbxop.<worker id>`): sent by the gateway, served by the worker holding the session. */
  sandboxOps: 'send' | 'serve' | 'none';
  /**
   * Image builds from a Dockerfile (`<prefix>.cmd.imgbuild.<worker id>`, docs/adr/0038): sent by the
   * gateway for a Harbor task over REST, served by the worker (one at a time) whose engine will run it.
   */
  imageBuilds?: 'send' | 'serve';
  buckets: Partial<Record<StackBucket, BucketAccess>>;
  /** The artifact object store (`OBJ_<CAIRN_ARTIFACT_BUCKET>`, ADR 0021): the runtime writes what the receipts name, readers fetch by sha256. */
  artifacts: BucketAccess | 'none';
  /**
   * The log of seal heads (ADR 0020): `write` — append leaves, keep the checkpoints' bucket, answer
   * checkpoint requests (the grader); `read` — read leaves and checkpoints, ask for a checkpoint.
   */
  tlog: BucketAccess | 'none';
  /** Stream and consumer state for health and metrics (stream info, consumer lists) of every stack stream. */
  monitors: boolean;
}

/** What intake records on admin chains (`admin.policy_changed` has no command that appends it yet). */
const ADMIN_TYPES = ['admin.tenant_created', 'admin.key_created', 'admin.key_rotated', 'admin.key_revoked'] as const satisfies readonly EventType[];
/** What every service that scans a run's derived text appends when it sees a secret (`endRunSecretSeen`), and a reaction that gives up (`run.failed`). */
const SECRET_SEEN = ['secret.redacted', 'alert.raised', 'run.failed'] as const satisfies readonly EventType[];

const NO_COMMANDS = { sends: [], serves: [], sandboxOps: 'none' } as const;

/** The commands the webhooks service serves: it owns its registrations and delivery queue (docs/adr/0027). */
export const WEBHOOKS_VERBS = ['webhook_replay', 'webhook_register', 'webhook_delete'] as const satisfies readonly CommandVerb[];
/** Every other command is intake's: it records them on chains. */
export const INTAKE_VERBS: readonly CommandVerb[] = COMMAND_VERBS.filter((verb) => !(WEBHOOKS_VERBS as readonly CommandVerb[]).includes(verb));

export const SERVICE_ROUTES: { readonly [S in NatsService]: ServiceRoute } = {
  intake: {
    appends: ['run.submitted', 'run.cancel_requested', 'run.cancelled', 'approval.granted', 'approval.rejected', 'grade.requested', 'sandbox.requested', ...ADMIN_TYPES],
    evidence: 'reads',
    watchesChains: false,
    sends: [],
    serves: [...INTAKE_VERBS],
    sandboxOps: 'none',
    buckets: {},
    artifacts: 'none', tlog: 'none',
    monitors: false,
  },
  policy: {
    // run.failed: a reaction that gives up (defaultGiveUp); alert.raised with it: a chain broken by a message that is not a receipt (recordChainBreak).
    appends: ['policy.decided', 'approval.requested', 'run.failed', 'alert.raised'],
    evidence: 'durable',
    // Its usage ledger (budgets, quotas): USAGE_RECEIPT_TYPES of @cairn/policy, which a test keeps equal.
    folds: [
      'run.submitted',
      'sandbox.requested',
      'policy.decided',
      'sandbox.created',
      'sandbox.destroyed',
      'run.executed',
      'run.failed',
      'run.retried',
      'run.rolled_back',
      'run.cancelled',
      'approval.rejected',
      'run.sealed',
    ],
    watchesChains: false,
    ...NO_COMMANDS,
    // secrets: names and grants of the catalog (ADR 0028); it holds no key to open a value.
    buckets: { workers: 'read', secrets: 'read' },
    artifacts: 'none', tlog: 'none',
    monitors: false,
  },
  scheduler: {
    // alert.raised: a chain broken by a message that is not a receipt (recordChainBreak, ADR 0033).
    // run.retried: its lease scan found the worker lost and the RunSpec has retries left (ADR 0035).
    appends: ['run.scheduled', 'run.retried', 'run.failed', 'run.cancelled', 'approval.rejected', 'alert.raised'],
    evidence: 'durable',
    watchesChains: false,
    ...NO_COMMANDS,
    buckets: { workers: 'read', leases: 'write', approvals: 'write', queue: 'write', drains: 'read' },
    artifacts: 'none', tlog: 'none',
    monitors: false,
  },
  runtime: {
    appends: [
      'sandbox.created',
      'step.started',
      'step.completed',
      'sandbox.destroyed',
      'run.executed',
      'run.failed',
      // A restart that finds a placement of its own it never finished, with retries left (ADR 0035).
      'run.retried',
      'run.cancelled',
      'approval.requested',
      'approval.rejected',
      'egress.denied',
      'secret.redacted',
      'alert.raised',
      'sandbox.exec.started',
      'sandbox.exec.completed',
      'sandbox.file.written',
      'sandbox.file.read',
      'sandbox.expired',
    ],
    evidence: 'durable',
    watchesChains: true,
    sends: [],
    serves: [],
    sandboxOps: 'serve',
    imageBuilds: 'serve',
    // secrets: the sealed values of the runs it runs, opened with the private key (ADR 0028).
    buckets: { workers: 'write', leases: 'write', secrets: 'read' },
    artifacts: 'write', tlog: 'none',
    monitors: false,
  },
  // kernel, verifier, grader: secrets read, to scan what they derive with the run's values (ADR 0028).
  kernel: { appends: ['kernel.facts', ...SECRET_SEEN], evidence: 'durable', watchesChains: false, ...NO_COMMANDS, buckets: { secrets: 'read' }, artifacts: 'read', tlog: 'none', monitors: false },
  verifier: { appends: ['verification.completed', ...SECRET_SEEN], evidence: 'durable', watchesChains: false, ...NO_COMMANDS, buckets: { secrets: 'read' }, artifacts: 'read', tlog: 'none', monitors: false },
  grader: { appends: ['judge.requested', 'judge.answered', 'grade.recorded', 'grade.failed', 'run.sealed', ...SECRET_SEEN], evidence: 'durable', watchesChains: false, ...NO_COMMANDS, buckets: { secrets: 'read' }, artifacts: 'read', tlog: 'write', monitors: false },
  // Reads every receipt, writes PostgreSQL only.
  projector: { appends: [], evidence: 'durable', watchesChains: false, ...NO_COMMANDS, buckets: {}, artifacts: 'none', tlog: 'none', monitors: false },
  // Owns its tables: registrations, deletions and replays are asked for by command; a receipt it cannot queue is logged, never failed on the chain.
  webhooks: { appends: [], evidence: 'routed', watchesChains: false, sends: [], serves: [...WEBHOOKS_VERBS], sandboxOps: 'none', buckets: {}, artifacts: 'none', tlog: 'none', monitors: false },
  // Appends nothing: everything it asks for goes through intake's commands or a worker's sandbox ops.
  gateway: {
    appends: [],
    evidence: 'follows',
    watchesChains: true,
    sends: [...COMMAND_VERBS],
    serves: [],
    sandboxOps: 'send',
    imageBuilds: 'send',
    // drains: an operator's `POST /v1/workers/:id/drain` (ADR 0026); secrets: the catalog's only writer, sealing to the public key (ADR 0028).
    buckets: { workers: 'read', leases: 'read', queue: 'read', drains: 'write', secrets: 'write' },
    artifacts: 'read',
    tlog: 'read',
    monitors: true,
  },
};

/** Receipt types no service appends today (their schemas exist for what is planned); no user may publish them. */
export const UNAPPENDED_TYPES: readonly EventType[] = EVENT_TYPES.filter((type) => !NATS_SERVICES.some((s) => SERVICE_ROUTES[s].appends.includes(type)));

/** The services whose row names `type`. */
export function appendersOf(type: EventType): NatsService[] {
  return NATS_SERVICES.filter((service) => SERVICE_ROUTES[service].appends.includes(type));
}

const EVIDENCE_READS: Record<ServiceRoute['evidence'], string> = {
  durable: 'its durable consumer, chain reads',
  reads: 'chain reads',
  follows: 'chain reads, ordered consumers of a chain',
  routed: 'durable consumers named for the types in force (made and removed as they change), chain reads',
};

/** SERVICE_ROUTES as the markdown table docs/security.md shows (a unit test keeps the two equal). */
export function serviceRoutesMarkdown(): string {
  const rows = NATS_SERVICES.map((service) => {
    const route = SERVICE_ROUTES[service];
    const appends = route.appends.length === 0 ? 'nothing' : route.appends.map((t) => `\`${t}\``).join(', ');
    const folds = route.folds === undefined || route.folds.length === 0 ? '' : `; folds ${route.folds.map((t) => `\`${t}\``).join(', ')} with an ordered consumer of its own`;
    const reads = `${EVIDENCE_READS[route.evidence]}${folds}${route.watchesChains ? '; subscribes to chains' : ''}`;
    const commands = [
      ...(route.sends.length > 0 ? [`sends ${route.sends.map((v) => `\`${v}\``).join(', ')}`] : []),
      ...(route.serves.length > 0 ? [`serves ${route.serves.map((v) => `\`${v}\``).join(', ')}`] : []),
      ...(route.sandboxOps === 'none' ? [] : [`${route.sandboxOps === 'send' ? 'sends' : 'serves (its worker\'s)'} sandbox ops`]),
      ...(route.imageBuilds === undefined ? [] : [`${route.imageBuilds === 'send' ? 'sends' : 'serves (its worker\'s)'} image builds`]),
    ];
    const buckets = [...STACK_BUCKETS.filter((b) => route.buckets[b] !== undefined).map((b) => `${b} (${route.buckets[b]})`), ...(route.artifacts === 'none' ? [] : [`artifacts (${route.artifacts})`])];
    return `| ${service} | ${appends} | ${reads} | ${commands.join('; ') || '—'} | ${buckets.join(', ') || '—'} |`;
  });
  return ['| service | appends (publish on `<prefix>.*.<type>`) | evidence reads | commands | buckets |', '|---|---|---|---|---|', ...rows].join('\n');
}
