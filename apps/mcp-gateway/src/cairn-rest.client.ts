import { isCairnError } from '@cairn/contracts';
import type {
  EventPage,
  ExecRequest,
  ExecResult,
  FileWrittenAnswer,
  KeyList,
  OutputStream,
  ProofBundle,
  RegradeAccepted,
  Run,
  RunArtifacts,
  Sandbox,
  SandboxList,
  SandboxSpec,
  SubmitAccepted,
  TlogCheckpoint,
  TlogConsistencyProof,
  TlogInclusionProof,
} from '@cairn/contracts';
import { Cairn } from '@cairn/sdk/client';
import type { Bytes } from '@cairn/sdk/client';

/*
 * The MCP gateway's side of the REST contract: every tool call is one request to the Cairn REST
 * gateway with the caller's own key, made by @cairn/sdk (the one client of the contract), so MCP
 * goes through the same authentication, tenancy, policy and chain as every other client (no side
 * door) and sees the same shapes. Failures come back as CairnErrors with the REST gateway's code,
 * or E_UNAVAILABLE when it does not answer; a refusal is passed on, never retried here.
 */

export type { EventPage, ExecRequest, ExecResult, KeyList, Run, RunArtifacts, Sandbox } from '@cairn/contracts';
export type Submitted = SubmitAccepted;
export type Regraded = RegradeAccepted;
export type Bundle = ProofBundle;
export type SandboxPage = SandboxList;
export type FileWritten = FileWrittenAnswer;
export type FileRead = Bytes;

/** The most of one output a tool reads (the tool result carries it whole). */
export const TOOL_READ_MAX_BYTES = 16 * 1024 * 1024;

/** What the run tools need from Cairn; a port, so the tools are testable without a gateway. */
export interface CairnRuns {
  submitRun(spec: unknown, idempotencyKey: string): Promise<Submitted>;
  /** Grades a verified run again whose grading failed (a judge's failure, ADR 0030). */
  regrade(runId: string, reason: string | undefined): Promise<Regraded>;
  getRun(runId: string): Promise<Run>;
  events(runId: string, after: number, limit: number): Promise<EventPage>;
  bundle(runId: string): Promise<Bundle>;
  /** What the run printed and wrote, as its chain records it. */
  artifacts(runId: string): Promise<RunArtifacts>;
  /** A step's stream, checked against `expectedSha256` (from the listing) as well as the gateway's header. */
  output(runId: string, step: number, stream: OutputStream, expectedSha256: string): Promise<Bytes>;
  artifact(runId: string, path: string, expectedSha256: string): Promise<Bytes>;
}

/** What the sandbox tools need from Cairn; a port like CairnRuns. */
export interface CairnSandboxes {
  createSandbox(spec: unknown, idempotencyKey?: string): Promise<Sandbox>;
  getSandbox(sandboxId: string): Promise<Sandbox>;
  listSandboxes(query: { state?: string; cursor?: string; limit?: number }): Promise<SandboxPage>;
  exec(sandboxId: string, request: ExecRequest): Promise<ExecResult>;
  writeFile(sandboxId: string, path: string, bytes: Uint8Array, mode?: number): Promise<FileWritten>;
  readFile(sandboxId: string, path: string): Promise<FileRead>;
  destroySandbox(sandboxId: string): Promise<Sandbox>;
  /** The proof bundle of the sandbox's chain (the format names the chain `runId`). */
  sandboxBundle(sandboxId: string): Promise<Bundle>;
}

/** What the key tools need from Cairn: the listing only (see key-tools.ts). */
export interface CairnKeys {
  listKeys(): Promise<KeyList>;
}

/** What the log tools need from Cairn: the three read routes of the log of seal heads. */
export interface CairnTlog {
  checkpoint(): Promise<TlogCheckpoint>;
  inclusion(chainId: string): Promise<TlogInclusionProof>;
  consistency(from: number, to: number): Promise<TlogConsistencyProof>;
}

export class CairnRestClient implements CairnRuns, CairnSandboxes, CairnKeys, CairnTlog {
  private readonly cairn: Cairn;

  constructor(url: string, apiKey: string) {
    this.cairn = new Cairn({ url, apiKey, retries: 0 });
  }

  /**
   * Checks that the key is one the REST gateway knows: E_UNAUTHORIZED when it is not. A known
   * key that may not read runs (E_FORBIDDEN) is still a key; its tool calls fail one by one.
   */
  async checkKey(): Promise<void> {
    try {
      await this.cairn.runs.list({ limit: 1 }, AbortSignal.timeout(10_000));
    } catch (error) {
      if (isCairnError(error) && error.code === 'E_FORBIDDEN') return;
      throw error;
    }
  }

  listKeys(): Promise<KeyList> {
    return this.cairn.keys.list();
  }

  checkpoint(): Promise<TlogCheckpoint> {
    return this.cairn.tlog.checkpoint();
  }

  inclusion(chainId: string): Promise<TlogInclusionProof> {
    return this.cairn.tlog.inclusion(chainId);
  }

  consistency(from: number, to: number): Promise<TlogConsistencyProof> {
    return this.cairn.tlog.consistency(from, to);
  }

  submitRun(spec: unknown, idempotencyKey: string): Promise<Submitted> {
    return this.cairn.runs.submit(spec, { idempotencyKey });
  }

  regrade(runId: string, reason: string | undefined): Promise<Regraded> {
    return this.cairn.runs.regrade(runId, reason);
  }

  getRun(runId: string): Promise<Run> {
    return this.cairn.runs.get(runId);
  }

  events(runId: string, after: number, limit: number): Promise<EventPage> {
    return this.cairn.runs.events(runId, { after, limit });
  }

  bundle(runId: string): Promise<Bundle> {
    return this.cairn.runs.bundle(runId);
  }

  artifacts(runId: string): Promise<RunArtifacts> {
    return this.cairn.runs.artifacts(runId);
  }

  output(runId: string, step: number, stream: OutputStream, expectedSha256: string): Promise<Bytes> {
    return this.cairn.runs.output(runId, step, stream, { maxBytes: TOOL_READ_MAX_BYTES, expectedSha256 });
  }

  artifact(runId: string, path: string, expectedSha256: string): Promise<Bytes> {
    return this.cairn.runs.artifact(runId, path, { maxBytes: TOOL_READ_MAX_BYTES, expectedSha256 });
  }

  async createSandbox(spec: unknown, idempotencyKey?: string): Promise<Sandbox> {
    const session = await this.cairn.sandboxes.create(spec as SandboxSpec, idempotencyKey === undefined ? {} : { idempotencyKey });
    return session.view;
  }

  getSandbox(sandboxId: string): Promise<Sandbox> {
    return this.cairn.sandboxes.get(sandboxId);
  }

  listSandboxes(query: { state?: string; cursor?: string; limit?: number }): Promise<SandboxPage> {
    return this.cairn.sandboxes.list(query as Parameters<Cairn['sandboxes']['list']>[0]);
  }

  exec(sandboxId: string, request: ExecRequest): Promise<ExecResult> {
    return this.cairn.sandboxes.exec(sandboxId, request);
  }

  writeFile(sandboxId: string, path: string, bytes: Uint8Array, mode?: number): Promise<FileWritten> {
    return this.cairn.sandboxes.writeFile(sandboxId, path, bytes, mode);
  }

  readFile(sandboxId: string, path: string): Promise<FileRead> {
    return this.cairn.sandboxes.readFile(sandboxId, path, { maxBytes: TOOL_READ_MAX_BYTES });
  }

  destroySandbox(sandboxId: string): Promise<Sandbox> {
    return this.cairn.sandboxes.destroy(sandboxId);
  }

  sandboxBundle(sandboxId: string): Promise<Bundle> {
    return this.cairn.sandboxes.bundle(sandboxId);
  }
}
