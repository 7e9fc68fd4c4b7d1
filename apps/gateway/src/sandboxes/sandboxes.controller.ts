import { API_ROUTES, CairnError, DEFAULT_EVENTS_PAGE, GetFileQuerySchema, IdempotencyKeySchema, isCairnError, ListEventsQuerySchema, ListSandboxesQuerySchema, parseExecRequest, parseSandboxSpec, PutFileQuerySchema, SandboxIdSchema, StreamEventsQuerySchema } from '@cairn/contracts';
import type { EventPage, FileWrittenAnswer, GetFileQuery, ListEventsQuery, ListSandboxesQuery, ProofBundle, PutFileQuery, Sandbox, SandboxList, StreamEventsQuery } from '@cairn/contracts';
import { Body, Controller, Headers, Param, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { resumeAfter } from '../runs/last-event-id.js';
import { buildProofBundle } from '../runs/proof-bundle.builder.js';
import { RunEventStreams } from '../runs/run-event-streams.service.js';
import { RunReadsRepository } from '../runs/run-reads.repository.js';
import { ExecStream } from './exec-stream.js';
import { execResult, SandboxOperations } from './sandbox-operations.service.js';
import { SandboxReadsRepository } from './sandbox-reads.repository.js';
import { QueueSpots } from '../workers/queue-spots.js';

const SANDBOX_ID = { schema: SandboxIdSchema };
const DEFAULT_SANDBOXES_PAGE = 50;
const NDJSON = 'application/x-ndjson';

function optionalIdempotencyKey(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const parsed = IdempotencyKeySchema.safeParse(header);
  if (parsed.success) return parsed.data;
  throw new CairnError('E_INPUT', 'Idempotency-Key: 1–200 printable ASCII characters', { field: 'Idempotency-Key' });
}

/** `Accept: application/x-ndjson` (alone or preferred among others) asks for the streamed answer. */
function wantsNdjson(accept: string | undefined): boolean {
  return accept !== undefined && accept.split(',').some((part) => part.split(';')[0]?.trim().toLowerCase() === NDJSON);
}

/**
 * `/v1/sandboxes…`: interactive sandbox sessions. Reads come from the `sandboxes` projection and
 * the chain's receipts (with the run routes' services: only the chain id differs); operations go
 * to the sessions backend, one at a time per sandbox.
 */
@Controller()
export class SandboxesController {
  constructor(
    private readonly sandboxes: SandboxReadsRepository,
    private readonly operations: SandboxOperations,
    private readonly chains: RunReadsRepository,
    private readonly streams: RunEventStreams,
    private readonly queue: QueueSpots,
  ) {}

  @ApiRoute(API_ROUTES.createSandbox)
  async create(
    @CurrentPrincipal() principal: Principal,
    @Headers('idempotency-key') key: string | undefined,
    @Body() body: unknown,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Sandbox> {
    const idempotencyKey = optionalIdempotencyKey(key);
    // Validated here: a bad spec is E_INPUT naming the field, and nothing is asked of anyone.
    const spec = parseSandboxSpec(body ?? {});
    // A client that goes away before the answer abandons the create: its sandbox is deleted, not stranded.
    const abandoned = new AbortController();
    const onClose = () => {
      if (!reply.raw.writableEnded) abandoned.abort();
    };
    reply.raw.once('close', onClose);
    let sandbox: Sandbox;
    try {
      sandbox = await this.operations.create(principal, spec, idempotencyKey, abandoned.signal);
    } finally {
      reply.raw.off('close', onClose);
    }
    void reply.header('location', `/v1/sandboxes/${sandbox.id}`);
    return sandbox;
  }

  @ApiRoute(API_ROUTES.listSandboxes)
  async list(@CurrentPrincipal() principal: Principal, @Query({ schema: ListSandboxesQuerySchema }) query: ListSandboxesQuery): Promise<SandboxList> {
    const page = await this.sandboxes.listSandboxes(principal.tenant, { limit: query.limit ?? DEFAULT_SANDBOXES_PAGE, cursor: query.cursor, state: query.state });
    return { ...page, items: await this.queue.withEach(page.items, (sandbox) => sandbox.id) };
  }

  @ApiRoute(API_ROUTES.getSandbox)
  async get(@CurrentPrincipal() principal: Principal, @Param('id', SANDBOX_ID) sandboxId: string): Promise<Sandbox> {
    const sandbox = await this.sandboxes.getSandbox(principal.tenant, sandboxId);
    return sandbox.state === 'PENDING' ? this.queue.with(sandboxId, sandbox) : sandbox;
  }

  @ApiRoute(API_ROUTES.deleteSandbox)
  delete(@CurrentPrincipal() principal: Principal, @Param('id', SANDBOX_ID) sandboxId: string): Promise<Sandbox> {
    return this.operations.destroy(principal, sandboxId);
  }

  @ApiRoute(API_ROUTES.execSandbox)
  async exec(
    @CurrentPrincipal() principal: Principal,
    @Param('id', SANDBOX_ID) sandboxId: string,
    @Body() body: unknown,
    @Headers('accept') accept: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const request = parseExecRequest(body);
    if (!wantsNdjson(accept)) {
      const outcome = await this.operations.exec(principal, sandboxId, request);
      void reply.status(API_ROUTES.execSandbox.status).header('content-type', 'application/json; charset=utf-8').send(execResult(outcome));
      return;
    }
    // Streamed: the status line goes out with the first output, so an error before any (404,
    // 409, a refused command) is still an ordinary error answer.
    const stream = new ExecStream(reply);
    try {
      const outcome = await this.operations.exec(principal, sandboxId, request, (which, chunk) => stream.output(which, chunk));
      stream.result(outcome);
    } catch (error) {
      if (!stream.started) throw error;
      stream.error(isCairnError(error) ? error : new CairnError('E_INTERNAL', 'internal error'));
      // The filter logs a server fault (its cause) and leaves the ended stream alone.
      throw error;
    }
  }

  @ApiRoute(API_ROUTES.putSandboxFile)
  put(
    @CurrentPrincipal() principal: Principal,
    @Param('id', SANDBOX_ID) sandboxId: string,
    @Query({ schema: PutFileQuerySchema }) query: PutFileQuery,
    @Body() body: unknown,
  ): Promise<FileWrittenAnswer> {
    if (!Buffer.isBuffer(body)) {
      throw new CairnError('E_INPUT', 'send the file as the request body, with Content-Type: application/octet-stream', { field: 'body' });
    }
    return this.operations.writeFile(principal, sandboxId, query.path, body, query.mode);
  }

  @ApiRoute(API_ROUTES.getSandboxFile)
  async read(
    @CurrentPrincipal() principal: Principal,
    @Param('id', SANDBOX_ID) sandboxId: string,
    @Query({ schema: GetFileQuerySchema }) query: GetFileQuery,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const file = await this.operations.readFile(principal, sandboxId, query.path);
    void reply
      .status(API_ROUTES.getSandboxFile.status)
      .header('content-type', 'application/octet-stream')
      .header('x-cairn-sha256', file.sha256)
      .header('x-cairn-seq', String(file.seq))
      .send(Buffer.from(file.content.buffer, file.content.byteOffset, file.content.byteLength));
  }

  @ApiRoute(API_ROUTES.listSandboxEvents)
  async events(
    @CurrentPrincipal() principal: Principal,
    @Param('id', SANDBOX_ID) sandboxId: string,
    @Query({ schema: ListEventsQuerySchema }) query: ListEventsQuery,
  ): Promise<EventPage> {
    await this.sandboxes.getSandbox(principal.tenant, sandboxId);
    return this.chains.eventPage(sandboxId, query.after ?? 0, query.limit ?? DEFAULT_EVENTS_PAGE);
  }

  @ApiRoute(API_ROUTES.streamSandboxEvents)
  async stream(
    @CurrentPrincipal() principal: Principal,
    @Param('id', SANDBOX_ID) sandboxId: string,
    @Query({ schema: StreamEventsQuerySchema }) query: StreamEventsQuery,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const after = resumeAfter(sandboxId, lastEventId, query.after);
    await this.sandboxes.getSandbox(principal.tenant, sandboxId);
    this.streams.start(reply, sandboxId, after);
  }

  @ApiRoute(API_ROUTES.getSandboxBundle)
  async bundle(@CurrentPrincipal() principal: Principal, @Param('id', SANDBOX_ID) sandboxId: string): Promise<ProofBundle> {
    await this.sandboxes.getSandbox(principal.tenant, sandboxId);
    return buildProofBundle(sandboxId, await this.chains.allReceipts(sandboxId));
  }
}
