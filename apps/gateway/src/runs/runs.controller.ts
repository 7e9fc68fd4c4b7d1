import { API_ROUTES, CairnError, CancelRequestSchema, RegradeRequestSchema, DEFAULT_EVENTS_PAGE, IdempotencyKeySchema, ListEventsQuerySchema, ListRunsQuerySchema, parseRunSpec, RunIdSchema, StreamEventsQuerySchema } from '@cairn/contracts';
import type { CancelAccepted, CancelRequest, EventPage, HarborSubmitAccepted, ListEventsQuery, ListRunsQuery, ProofBundle, RegradeAccepted, RegradeRequest, Run, RunList, RunSpec, StreamEventsQuery, SubmitAccepted } from '@cairn/contracts';
import { ImageBuilder } from '@cairn/sandbox-sessions';
import { Body, Controller, Headers, Inject, Param, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG } from '../gateway.tokens.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { resumeAfter } from './last-event-id.js';
import { harborSpecOf, harborUploadOf, imageBuildOf } from './harbor-submission.js';
import { buildProofBundle } from './proof-bundle.builder.js';
import { RunCommands } from './run-commands.service.js';
import { RunEventStreams } from './run-event-streams.service.js';
import { RunReadsRepository } from './run-reads.repository.js';
import { QueueSpots } from '../workers/queue-spots.js';

const RUN_ID = { schema: RunIdSchema };
const DEFAULT_RUNS_PAGE = 50;

function idempotencyKey(header: string | undefined): string {
  const parsed = IdempotencyKeySchema.safeParse(header);
  if (parsed.success) return parsed.data;
  throw new CairnError('E_INPUT', 'Idempotency-Key: a header of 1–200 printable ASCII characters is required', { field: 'Idempotency-Key' });
}

/** `/v1/runs…`: reads from the projections, writes only as commands to intake. */
@Controller()
export class RunsController {
  constructor(
    private readonly reads: RunReadsRepository,
    private readonly commands: RunCommands,
    private readonly streams: RunEventStreams,
    private readonly queue: QueueSpots,
    private readonly images: ImageBuilder,
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
  ) {}

  @ApiRoute(API_ROUTES.submitRun)
  async submit(
    @CurrentPrincipal() principal: Principal,
    @Headers('idempotency-key') key: string | undefined,
    @Body() body: unknown,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<SubmitAccepted> {
    const idempotency = idempotencyKey(key);
    // Validated here, synchronously: a bad spec is E_INPUT naming the field, and nothing is published.
    return this.accept(principal, idempotency, parseRunSpec(body), reply);
  }

  /** Submits a spec checked already, and answers 202 with the run's location. */
  private async accept(principal: Principal, idempotency: string, spec: RunSpec, reply: FastifyReply): Promise<SubmitAccepted> {
    const { runId, duplicate } = await this.commands.submit(principal, idempotency, spec);
    // Read-your-writes for the common case: a GET right after the 202 finds the run.
    if (!duplicate && this.config.CAIRN_GATEWAY_SUBMIT_WAIT_MS > 0) await this.reads.waitForRun(runId, this.config.CAIRN_GATEWAY_SUBMIT_WAIT_MS);
    void reply.header('location', `/v1/runs/${runId}`);
    return { runId, state: 'SUBMITTED', duplicate };
  }

  /**
   * A Harbor task directory as a run (docs/adr/0034, 0038): the files are checked and mapped here by
   * the mapping the CLI uses, so a bad task is E_INPUT and nothing is published; a worker builds its
   * environment (the gateway has no engine) — once per digest — and the run is submitted on that
   * image, with the build recorded, as the CLI submits it.
   */
  @ApiRoute(API_ROUTES.submitHarborTask)
  async submitHarborTask(
    @CurrentPrincipal() principal: Principal,
    @Headers('idempotency-key') key: string | undefined,
    @Body() body: unknown,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<HarborSubmitAccepted> {
    const idempotency = idempotencyKey(key);
    const upload = harborUploadOf(body);
    const built = await this.images.build({
      tenant: principal.tenant,
      requestedBy: `key:${principal.keyId}`,
      dockerfile: upload.build.dockerfile,
      files: upload.build.files,
      bases: upload.build.bases,
      ...(upload.build.timeoutSeconds === undefined ? {} : { timeoutSeconds: upload.build.timeoutSeconds }),
    });
    const spec = harborSpecOf(upload, built);
    const accepted = await this.accept(principal, idempotency, spec, reply);
    return { ...accepted, ...imageBuildOf(built), workerId: built.worker_id };
  }

  @ApiRoute(API_ROUTES.listRuns)
  async list(@CurrentPrincipal() principal: Principal, @Query({ schema: ListRunsQuerySchema }) query: ListRunsQuery): Promise<RunList> {
    const page = await this.reads.listRuns(principal.tenant, {
      limit: query.limit ?? DEFAULT_RUNS_PAGE,
      cursor: query.cursor,
      state: query.state,
      createdAfter: query.createdAfter,
      createdBefore: query.createdBefore,
    });
    return { ...page, items: await this.queue.withEach(page.items, (run) => run.runId) };
  }

  @ApiRoute(API_ROUTES.getRun)
  async get(@CurrentPrincipal() principal: Principal, @Param('id', RUN_ID) runId: string): Promise<Run> {
    const run = await this.reads.getRun(principal.tenant, runId);
    // Waiting for room: where in line, and for what.
    return run.state === 'SUBMITTED' ? this.queue.with(runId, run) : run;
  }

  @ApiRoute(API_ROUTES.listEvents)
  async events(
    @CurrentPrincipal() principal: Principal,
    @Param('id', RUN_ID) runId: string,
    @Query({ schema: ListEventsQuerySchema }) query: ListEventsQuery,
  ): Promise<EventPage> {
    await this.reads.getRun(principal.tenant, runId);
    return this.reads.eventPage(runId, query.after ?? 0, query.limit ?? DEFAULT_EVENTS_PAGE);
  }

  @ApiRoute(API_ROUTES.streamEvents)
  async stream(
    @CurrentPrincipal() principal: Principal,
    @Param('id', RUN_ID) runId: string,
    @Query({ schema: StreamEventsQuerySchema }) query: StreamEventsQuery,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const after = resumeAfter(runId, lastEventId, query.after);
    await this.reads.getRun(principal.tenant, runId);
    this.streams.start(reply, runId, after);
  }

  @ApiRoute(API_ROUTES.getBundle)
  async bundle(@CurrentPrincipal() principal: Principal, @Param('id', RUN_ID) runId: string): Promise<ProofBundle> {
    await this.reads.getRun(principal.tenant, runId);
    return buildProofBundle(runId, await this.reads.allReceipts(runId));
  }

  @ApiRoute(API_ROUTES.cancelRun)
  async cancel(
    @CurrentPrincipal() principal: Principal,
    @Param('id', RUN_ID) runId: string,
    @Body({ schema: CancelRequestSchema.optional() }) body: CancelRequest | undefined,
  ): Promise<CancelAccepted> {
    await this.commands.cancel(principal, runId, body?.reason);
    // Intake appended run.cancelled (or had before): that is the run's state on its chain now.
    return { runId, state: 'CANCELLED' };
  }

  @ApiRoute(API_ROUTES.regradeRun)
  async regrade(
    @CurrentPrincipal() principal: Principal,
    @Param('id', RUN_ID) runId: string,
    @Body({ schema: RegradeRequestSchema.optional() }) body: RegradeRequest | undefined,
  ): Promise<RegradeAccepted> {
    const done = await this.commands.regrade(principal, runId, body?.reason);
    return { runId, duplicate: done.duplicate };
  }
}
