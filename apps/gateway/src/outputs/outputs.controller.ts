import { Readable } from 'node:stream';
import { API_ROUTES, OUTPUT_PARAMS, StepOutputQuerySchema } from '@cairn/contracts';
import type { OutputStream, RunArtifacts, StepOutputQuery } from '@cairn/contracts';
import { Controller, Param, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { OUTPUT_SECURITY_HEADERS } from './output-media.js';
import { RunOutputsService } from './outputs.service.js';
import type { ServedOutput } from './outputs.service.js';

const RUN_ID = { schema: OUTPUT_PARAMS.run.id };
const STEP_INDEX = { schema: OUTPUT_PARAMS.run.index };
const STREAM = { schema: OUTPUT_PARAMS.run.stream };
const ARTIFACT_PATH = { schema: OUTPUT_PARAMS.artifact.path };
const SANDBOX_ID = { schema: OUTPUT_PARAMS.exec.id };
const EXEC_ID = { schema: OUTPUT_PARAMS.exec.execId };

/** `…/steps/:index/:stream`, `…/artifacts…`, `…/execs/:execId/:stream`: outputs read back, checked against the chain. */
@Controller()
export class OutputsController {
  constructor(private readonly outputs: RunOutputsService) {}

  @ApiRoute(API_ROUTES.getRunArtifacts)
  artifacts(@CurrentPrincipal() principal: Principal, @Param('id', RUN_ID) runId: string): Promise<RunArtifacts> {
    return this.outputs.list(principal, runId);
  }

  @ApiRoute(API_ROUTES.getStepOutput)
  async step(
    @CurrentPrincipal() principal: Principal,
    @Param('id', RUN_ID) runId: string,
    @Param('index', STEP_INDEX) index: number,
    @Param('stream', STREAM) stream: OutputStream,
    @Query({ schema: StepOutputQuerySchema }) query: StepOutputQuery,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    this.send(reply, API_ROUTES.getStepOutput.status, await this.outputs.stepStream(principal, runId, index, stream, query.attempt));
  }

  @ApiRoute(API_ROUTES.getRunArtifact)
  async artifact(@CurrentPrincipal() principal: Principal, @Param('id', RUN_ID) runId: string, @Param('*', ARTIFACT_PATH) path: string, @Res() reply: FastifyReply): Promise<void> {
    this.send(reply, API_ROUTES.getRunArtifact.status, await this.outputs.file(principal, runId, path));
  }

  @ApiRoute(API_ROUTES.getExecOutput)
  async exec(
    @CurrentPrincipal() principal: Principal,
    @Param('id', SANDBOX_ID) sandboxId: string,
    @Param('execId', EXEC_ID) execId: string,
    @Param('stream', STREAM) stream: OutputStream,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    this.send(reply, API_ROUTES.getExecOutput.status, await this.outputs.execStream(principal, sandboxId, execId, stream));
  }

  /**
   * The checked bytes, streamed. Content-Length is their size, so a serving cut short (the file
   * changed after the check: `chunks()` throws) is a broken answer to every client, never a
   * shorter one that looks whole.
   */
  private send(reply: FastifyReply, status: number, served: ServedOutput): void {
    const { artifact } = served;
    const body = Readable.from(artifact.chunks(), { objectMode: false });
    body.once('error', (error) => this.outputs.servingFailed(served, error));
    // The client went away before the end: the file is closed all the same.
    reply.raw.once('close', () => {
      if (!body.destroyed) body.destroy();
      void artifact.close();
    });
    void reply.status(status).headers({
      ...OUTPUT_SECURITY_HEADERS,
      'content-type': served.mediaType,
      'content-length': String(artifact.bytes),
      'x-cairn-sha256': artifact.sha256,
      ...(served.disposition === null ? {} : { 'content-disposition': served.disposition }),
    });
    void reply.send(body);
  }
}
