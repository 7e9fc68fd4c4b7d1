import { ADMIN_EVENT_TYPES, COMMAND_VERBS, EVENT_TYPES } from '@cairn/contracts';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { bucketStream, commandDurableOf, evidenceDurableOf, imageBuildsDurableOf, natsInboxPrefix, natsPermissionsFor, permits, renderAuthorization, sandboxOpsDurableOf, subjectMatches } from './nats-permissions.js';
import type { StackNatsNames } from './nats-permissions.js';
import { appendersOf, INTAKE_VERBS, NATS_SERVICES, SERVICE_ROUTES, serviceRoutesMarkdown, STACK_BUCKETS, UNAPPENDED_TYPES, WEBHOOKS_VERBS } from './service-routes.js';

const NAMES: StackNatsNames = {
  evidenceStream: 'CAIRN_EVIDENCE_T1',
  evidencePrefix: 'cairn.t1.evidence',
  commandStream: 'CAIRN_COMMANDS_T1',
  commandPrefix: 'cairn.t1',
  buckets: { workers: 'cairn_workers_t1', leases: 'cairn_leases_t1', approvals: 'cairn_leases_t1_approvals', queue: 'cairn_leases_t1_queue', drains: 'cairn_workers_t1_drains', secrets: 'cairn_secrets_t1' },
  artifactBucket: 'cairn_artifacts_t1',
  tlog: { stream: 'CAIRN_EVIDENCE_T1_TLOG', subjectPrefix: 'cairn.t1.evidence_tlog', checkpointBucket: 'CAIRN_EVIDENCE_T1_TLOG_CHECKPOINTS' },
  workerId: 'local-t1',
};
const RUN = 'run_01jabc';
const receiptSubject = (type: string, chain = RUN) => `${NAMES.evidencePrefix}.${chain}.${type}`;
const all = Object.fromEntries(NATS_SERVICES.map((s) => [s, natsPermissionsFor(s, NAMES)])) as Record<(typeof NATS_SERVICES)[number], ReturnType<typeof natsPermissionsFor>>;
const STREAMS = [NAMES.evidenceStream, NAMES.commandStream, ...STACK_BUCKETS.map((b) => bucketStream(NAMES.buckets[b]))];

describe('the service table against the contracts', () => {
  it('names an appender for every receipt type but the two nobody writes yet', () => {
    expect([...UNAPPENDED_TYPES].sort()).toEqual(['admin.policy_changed', 'run.rolled_back']);
    for (const type of EVENT_TYPES) expect(appendersOf(type).length > 0 || UNAPPENDED_TYPES.includes(type), type).toBe(true);
    for (const service of NATS_SERVICES) for (const type of SERVICE_ROUTES[service].appends) expect(EVENT_TYPES, `${service} ${type}`).toContain(type);
  });

  it('gives the receipts that carry the claim to one service each', () => {
    expect(appendersOf('run.sealed')).toEqual(['grader']);
    expect(appendersOf('grade.recorded')).toEqual(['grader']);
    // The judge's receipts and a failed grade are the grader's; a request to grade again is intake's (ADR 0030).
    for (const type of ['judge.requested', 'judge.answered', 'grade.failed'] as const) expect(appendersOf(type)).toEqual(['grader']);
    expect(appendersOf('grade.requested')).toEqual(['intake']);
    expect(appendersOf('verification.completed')).toEqual(['verifier']);
    expect(appendersOf('kernel.facts')).toEqual(['kernel']);
    expect(appendersOf('policy.decided')).toEqual(['policy']);
    expect(appendersOf('run.scheduled')).toEqual(['scheduler']);
    expect(appendersOf('run.submitted')).toEqual(['intake']);
    for (const type of ['step.started', 'step.completed', 'sandbox.created', 'sandbox.destroyed', 'run.executed', 'sandbox.exec.started', 'sandbox.exec.completed', 'sandbox.file.written', 'sandbox.file.read', 'sandbox.expired', 'egress.denied'] as const) {
      expect(appendersOf(type), type).toEqual(['runtime']);
    }
    for (const type of ADMIN_EVENT_TYPES) expect(appendersOf(type), type).toEqual(type === 'admin.policy_changed' ? [] : ['intake']);
    for (const service of ['gateway', 'projector', 'webhooks'] as const) expect(SERVICE_ROUTES[service].appends, service).toEqual([]);
  });

  it('has intake serve every command verb but the webhooks service\'s three, and the gateway send them all', () => {
    expect(WEBHOOKS_VERBS).toEqual(['webhook_replay', 'webhook_register', 'webhook_delete']);
    for (const verb of COMMAND_VERBS) {
      expect(NATS_SERVICES.filter((s) => SERVICE_ROUTES[s].serves.includes(verb)), verb).toEqual([verb.startsWith('webhook_') ? 'webhooks' : 'intake']);
      expect(NATS_SERVICES.filter((s) => SERVICE_ROUTES[s].sends.includes(verb)), verb).toEqual(['gateway']);
    }
  });
});

describe('natsPermissionsFor', () => {
  it('lets each service publish exactly the receipt types of its row, on any chain', () => {
    for (const service of NATS_SERVICES) {
      for (const type of EVENT_TYPES) {
        const chain = type.startsWith('admin.') ? 'adm_acme' : type.startsWith('sandbox.') ? 'sbx_01j' : RUN;
        expect(permits(all[service].publish, receiptSubject(type, chain)), `${service} ${type}`).toBe(SERVICE_ROUTES[service].appends.includes(type));
      }
      // A subject outside the layout (no type, or a bare chain) is nobody's.
      expect(permits(all[service].publish, `${NAMES.evidencePrefix}.${RUN}`), service).toBe(false);
      expect(permits(all[service].publish, `${NAMES.evidencePrefix}.${RUN}.run.sealed.extra`), service).toBe(false);
    }
  });

  it('gives no service a stream to create, change, delete or purge, nor a message to delete', () => {
    for (const service of NATS_SERVICES) {
      for (const stream of STREAMS) {
        for (const op of ['STREAM.CREATE', 'STREAM.UPDATE', 'STREAM.DELETE', 'STREAM.PURGE', 'STREAM.MSG.DELETE', 'STREAM.SNAPSHOT', 'STREAM.RESTORE']) {
          expect(permits(all[service].publish, `$JS.API.${op}.${stream}`), `${service} ${op} ${stream}`).toBe(false);
        }
      }
      expect(permits(all[service].publish, '$JS.API.STREAM.CREATE.OTHER'), service).toBe(false);
    }
  });

  it("gives each service its own inboxes only, and lets it answer only into the inboxes of those it serves", () => {
    const services = Object.keys(all) as (keyof typeof all)[];
    for (const service of services) {
      const own = natsInboxPrefix(service, NAMES.workerId);
      expect(all[service].subscribe.allow.filter((s) => s.startsWith('_INBOX')), service).toEqual([`${own}.>`]);
      for (const other of services) {
        if (other !== service) expect(permits(all[service].subscribe, `${natsInboxPrefix(other, NAMES.workerId)}.x`), `${service} reads ${other}'s`).toBe(false);
      }
      expect(permits(all[service].subscribe, '_INBOX.x'), service).toBe(false);
      expect(permits(all[service].publish, '_INBOX.x'), service).toBe(false);
    }
    // Another worker's inboxes are not this worker's.
    expect(natsInboxPrefix('runtime', 'w.1')).toBe('_INBOX_runtime.w_1');
    expect(permits(all.runtime.subscribe, '_INBOX_runtime.other-worker.x')).toBe(false);
    const answers = (service: keyof typeof all) => services.filter((to) => permits(all[service].publish, `${natsInboxPrefix(to, NAMES.workerId)}.x`));
    expect(answers('intake')).toEqual(['gateway']);
    expect(answers('webhooks')).toEqual(['gateway']);
    expect(answers('runtime')).toEqual(['gateway']);
    // The gateway answers a worker's requests for a file's chunks only, never another of its inboxes (its publish acks).
    expect(answers('gateway')).toEqual([]);
    expect(permits(all.gateway.publish, `${natsInboxPrefix('runtime', NAMES.workerId)}.chunks.abc`)).toBe(true);
    expect(permits(all.gateway.publish, `${natsInboxPrefix('runtime', NAMES.workerId)}.Ab12Cd.7`)).toBe(false);
    expect(answers('grader')).toEqual(['gateway']);
    for (const quiet of ['policy', 'scheduler', 'kernel', 'verifier', 'projector'] as const) expect(answers(quiet), quiet).toEqual([]);
  });

  it('leaves the projector nothing to publish but its acks and reads', () => {
    const projector = all.projector.publish;
    for (const subject of projector.allow) {
      expect(subject, subject).toMatch(/^\$JS\.(ACK\.CAIRN_EVIDENCE_T1\.cairn-projector\.>|API\.(INFO|STREAM\.INFO\.|DIRECT\.GET\.|CONSUMER\.(INFO|CREATE|DURABLE\.CREATE|MSG\.NEXT)\.CAIRN_EVIDENCE_T1\.cairn-projector))/);
    }
    expect(permits(projector, `$JS.ACK.${NAMES.evidenceStream}.cairn-projector.1.2.3.4.5`)).toBe(true);
    expect(permits(projector, `$KV.${NAMES.buckets.leases}.${RUN}`)).toBe(false);
    expect(permits(projector, `${NAMES.commandPrefix}.cmd.submit`)).toBe(false);
    expect(permits(projector, '_INBOX.abc')).toBe(false);
  });

  it('lets the gateway send commands and sandbox ops, and keeps it off the stack durables it could otherwise pull from', () => {
    const gateway = all.gateway.publish;
    for (const verb of COMMAND_VERBS) expect(permits(gateway, `${NAMES.commandPrefix}.cmd.${verb}`), verb).toBe(true);
    expect(permits(gateway, `${NAMES.commandPrefix}.cmd.sbxop.local-t1`)).toBe(true);
    // Its own ordered consumers of a chain, yes; the grader's or the runtime's durable, no.
    expect(permits(gateway, `$JS.API.CONSUMER.CREATE.${NAMES.evidenceStream}.Xyz_1.${NAMES.evidencePrefix}.${RUN}.>`)).toBe(true);
    expect(permits(gateway, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.evidenceStream}.Xyz_1`)).toBe(true);
    for (const service of ['grader', 'runtime', 'projector'] as const) {
      const durable = evidenceDurableOf(service, NAMES.workerId);
      expect(permits(gateway, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.evidenceStream}.${durable}`), durable).toBe(false);
      expect(permits(gateway, `$JS.API.CONSUMER.CREATE.${NAMES.evidenceStream}.${durable}.${NAMES.evidencePrefix}.>`), durable).toBe(false);
      expect(permits(gateway, `$JS.ACK.${NAMES.evidenceStream}.${durable}.1.2.3.4.5`), durable).toBe(false);
    }
    expect(permits(gateway, `$KV.${NAMES.buckets.workers}.local-t1`)).toBe(false);
  });

  it('lets the webhooks service make, pull, ack and remove durables named for its types, and no other service\'s', () => {
    const webhooks = all.webhooks.publish;
    for (const name of ['cairn-webhooks-parked', 'cairn-webhooks-4bdd01ae085f']) {
      expect(permits(webhooks, `$JS.API.CONSUMER.CREATE.${NAMES.evidenceStream}.${name}.${NAMES.evidencePrefix}.*.run.sealed`), name).toBe(true);
      expect(permits(webhooks, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.evidenceStream}.${name}`), name).toBe(true);
      expect(permits(webhooks, `$JS.ACK.${NAMES.evidenceStream}.${name}.1.2.3.4.5`), name).toBe(true);
      expect(permits(webhooks, `$JS.API.CONSUMER.DELETE.${NAMES.evidenceStream}.${name}`), name).toBe(true);
    }
    expect(permits(webhooks, `$JS.API.CONSUMER.LIST.${NAMES.evidenceStream}`)).toBe(true);
    for (const service of ['grader', 'runtime', 'projector', 'policy'] as const) {
      const durable = evidenceDurableOf(service, NAMES.workerId);
      expect(permits(webhooks, `$JS.API.CONSUMER.DELETE.${NAMES.evidenceStream}.${durable}`), durable).toBe(false);
      expect(permits(webhooks, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.evidenceStream}.${durable}`), durable).toBe(false);
      expect(permits(webhooks, `$JS.ACK.${NAMES.evidenceStream}.${durable}.1.2.3.4.5`), durable).toBe(false);
    }
    expect(permits(webhooks, `${NAMES.evidencePrefix}.${RUN}.run.sealed`)).toBe(false);
  });

  it('lets policy make and pull an ordered consumer of its own for its usage ledger, and keeps it off every other service\'s durable', () => {
    const policy = all.policy.publish;
    expect(permits(policy, `$JS.API.CONSUMER.CREATE.${NAMES.evidenceStream}.Xyz_1`)).toBe(true);
    expect(permits(policy, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.evidenceStream}.Xyz_1`)).toBe(true);
    expect(permits(policy, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.evidenceStream}.cairn-policy`)).toBe(true);
    for (const service of ['grader', 'runtime', 'projector', 'scheduler'] as const) {
      const durable = evidenceDurableOf(service, NAMES.workerId);
      expect(permits(policy, `$JS.API.CONSUMER.DELETE.${NAMES.evidenceStream}.${durable}`), durable).toBe(false);
      expect(permits(policy, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.evidenceStream}.${durable}`), durable).toBe(false);
      expect(permits(policy, `$JS.API.CONSUMER.CREATE.${NAMES.evidenceStream}.${durable}.${NAMES.evidencePrefix}.>`), durable).toBe(false);
    }
    // Folding is reading: it still publishes no type of its row's but its own.
    expect(permits(policy, `${NAMES.evidencePrefix}.${RUN}.run.sealed`)).toBe(false);
  });

  it('lets only the runtime put artifacts; the readers of outputs read them; nobody else touches the store', () => {
    const stream = `OBJ_${NAMES.artifactBucket}`;
    const chunk = `$O.${NAMES.artifactBucket}.C.abc`;
    expect(permits(all.runtime.publish, chunk)).toBe(true);
    for (const service of ['kernel', 'verifier', 'grader', 'gateway'] as const) {
      expect(permits(all[service].publish, `$JS.API.STREAM.MSG.GET.${stream}`), service).toBe(true);
      expect(permits(all[service].publish, chunk), service).toBe(false);
      expect(permits(all[service].publish, `$JS.API.STREAM.PURGE.${stream}`), service).toBe(false);
    }
    for (const service of ['intake', 'policy', 'scheduler', 'projector', 'webhooks'] as const) {
      expect(permits(all[service].publish, `$JS.API.STREAM.MSG.GET.${stream}`), service).toBe(false);
      expect(permits(all[service].publish, chunk), service).toBe(false);
    }
    for (const service of NATS_SERVICES) expect(permits(all[service].publish, `$JS.API.STREAM.CREATE.${stream}`), service).toBe(false);
  });

  it('lets only the grader append leaves and sign checkpoints; the gateway reads them and asks for one', () => {
    const leaf = `${NAMES.tlog.subjectPrefix}.leaf.${RUN}`;
    const sign = `${NAMES.tlog.subjectPrefix}.checkpoint.sign`;
    expect(permits(all.grader.publish, leaf)).toBe(true);
    expect(permits(all.grader.publish, `$KV.${NAMES.tlog.checkpointBucket}.latest`)).toBe(true);
    expect(permits(all.grader.subscribe, sign)).toBe(true);
    expect(permits(all.gateway.publish, sign)).toBe(true);
    expect(permits(all.gateway.publish, `$JS.API.DIRECT.GET.${NAMES.tlog.stream}`)).toBe(true);
    for (const service of NATS_SERVICES.filter((s) => s !== 'grader')) {
      expect(permits(all[service].publish, leaf), service).toBe(false);
      expect(permits(all[service].publish, `$KV.${NAMES.tlog.checkpointBucket}.latest`), service).toBe(false);
      expect(permits(all[service].subscribe, sign), service).toBe(false);
    }
  });

  it('scopes durables to their owner: intake its verbs, the webhooks service its replay, registration and deletion, a runtime its own worker', () => {
    for (const verb of INTAKE_VERBS) {
      expect(permits(all.intake.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${commandDurableOf(verb)}`), verb).toBe(true);
      expect(permits(all.runtime.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${commandDurableOf(verb)}`), verb).toBe(false);
      expect(permits(all.webhooks.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${commandDurableOf(verb)}`), verb).toBe(false);
    }
    const replay = commandDurableOf('webhook_replay', 'webhooks');
    expect(replay).toBe('cairn-webhooks-cmd-webhook-replay');
    expect(permits(all.webhooks.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${replay}`)).toBe(true);
    expect(permits(all.webhooks.publish, `$JS.ACK.${NAMES.commandStream}.${replay}.1.2.3.4.5`)).toBe(true);
    expect(permits(all.webhooks.publish, `${NAMES.commandPrefix}.cmd.webhook_replay`)).toBe(false);
    expect(permits(all.intake.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${replay}`)).toBe(false);
    expect(permits(all.gateway.publish, `${NAMES.commandPrefix}.cmd.webhook_replay`)).toBe(true);
    for (const verb of ['webhook_register', 'webhook_delete'] as const) {
      const durable = commandDurableOf(verb, 'webhooks');
      expect(durable).toBe(`cairn-webhooks-cmd-${verb.replace('_', '-')}`);
      expect(permits(all.webhooks.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${durable}`), verb).toBe(true);
      expect(permits(all.webhooks.publish, `$JS.ACK.${NAMES.commandStream}.${durable}.1.2.3.4.5`), verb).toBe(true);
      // The webhooks service serves its verbs, never sends them; intake cannot take them; only the gateway sends them.
      expect(permits(all.webhooks.publish, `${NAMES.commandPrefix}.cmd.${verb}`), verb).toBe(false);
      expect(permits(all.intake.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${durable}`), verb).toBe(false);
      expect(permits(all.intake.publish, `${NAMES.commandPrefix}.cmd.${verb}`), verb).toBe(false);
      expect(permits(all.gateway.publish, `${NAMES.commandPrefix}.cmd.${verb}`), verb).toBe(true);
      expect(permits(all.gateway.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${durable}`), verb).toBe(false);
    }
    expect(permits(all.runtime.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${sandboxOpsDurableOf('local-t1')}`)).toBe(true);
    const other = natsPermissionsFor('runtime', { ...NAMES, workerId: 'w2.example' });
    expect(permits(other.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${sandboxOpsDurableOf('local-t1')}`)).toBe(false);
    expect(permits(other.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.evidenceStream}.cairn-runtime-w2_example`)).toBe(true);
    expect(permits(other.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.evidenceStream}.cairn-runtime-local-t1`)).toBe(false);
  });

  it('lets the gateway send image builds and only the worker they name take them (docs/adr/0038)', () => {
    const subject = `${NAMES.commandPrefix}.cmd.imgbuild.local-t1`;
    expect(permits(all.gateway.publish, subject)).toBe(true);
    for (const service of NATS_SERVICES.filter((s) => s !== 'gateway')) expect(permits(all[service].publish, subject), service).toBe(false);
    expect(permits(all.runtime.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${imageBuildsDurableOf('local-t1')}`)).toBe(true);
    expect(permits(all.gateway.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${imageBuildsDurableOf('local-t1')}`)).toBe(false);
    const other = natsPermissionsFor('runtime', { ...NAMES, workerId: 'w2.example' });
    expect(permits(other.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${imageBuildsDurableOf('local-t1')}`)).toBe(false);
    expect(permits(other.publish, `$JS.API.CONSUMER.MSG.NEXT.${NAMES.commandStream}.${imageBuildsDurableOf('w2.example')}`)).toBe(true);
    // The worker answers the gateway's inboxes (the build's end, its chunk requests); the gateway a worker's chunk inboxes only.
    expect(permits(other.publish, '_INBOX_gateway.abc')).toBe(true);
    expect(permits(all.gateway.publish, '_INBOX_runtime.w2_example.chunks.abc')).toBe(true);
    expect(permits(all.gateway.publish, '_INBOX_runtime.w2_example.abc')).toBe(false);
  });

  it('writes a bucket only for the services whose row says write', () => {
    for (const service of NATS_SERVICES) {
      for (const bucket of STACK_BUCKETS) {
        const access = SERVICE_ROUTES[service].buckets[bucket];
        const name = NAMES.buckets[bucket];
        expect(permits(all[service].publish, `$KV.${name}.some-key`), `${service} writes ${bucket}`).toBe(access === 'write');
        expect(permits(all[service].publish, `$JS.API.DIRECT.GET.${bucketStream(name)}.$KV.${name}.some-key`), `${service} reads ${bucket}`).toBe(access !== undefined);
      }
    }
  });

  it('renders a nats-server authorization block of nkeys, one user each', () => {
    const text = renderAuthorization(
      [
        { name: 'grader', nkey: 'UGRADER', permissions: all.grader },
        { name: 'gateway', nkey: 'UGATEWAY', permissions: all.gateway },
      ],
      'generated\nfor a test',
    );
    expect(text).toMatch(/^# generated\n# for a test\nauthorization \{\n {2}users: \[/);
    expect(text).toContain('nkey: "UGRADER"');
    expect(text).toContain(`"${NAMES.evidencePrefix}.*.run.sealed"`);
    expect(text).toContain('deny: [');
    expect(text).not.toContain('password');
  });

  it('is the table docs/security.md shows', async () => {
    const doc = await readFile(fileURLToPath(new URL('../../../docs/security.md', import.meta.url)), 'utf8');
    const start = doc.indexOf('<!-- service-routes:start -->');
    const end = doc.indexOf('<!-- service-routes:end -->');
    expect(start, 'docs/security.md has the markers').toBeGreaterThan(0);
    expect(doc.slice(start + '<!-- service-routes:start -->'.length, end).trim()).toBe(serviceRoutesMarkdown());
  });
});

describe('subjectMatches', () => {
  it('reads * as one token and > as one or more', () => {
    expect(subjectMatches('a.*.c', 'a.b.c')).toBe(true);
    expect(subjectMatches('a.*.c', 'a.b.x.c')).toBe(false);
    expect(subjectMatches('a.>', 'a')).toBe(false);
    expect(subjectMatches('a.>', 'a.b.c')).toBe(true);
    expect(subjectMatches('a.b', 'a.b.c')).toBe(false);
    expect(subjectMatches('>', 'anything.at.all')).toBe(true);
  });
});
