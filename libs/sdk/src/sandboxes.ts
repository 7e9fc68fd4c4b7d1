import {
  API_COMPONENTS,
  CairnError,
  ErrorCodeSchema,
  ExecRequestSchema,
  ExecStreamLineSchema,
  IdempotencyKeySchema,
  ListSandboxesQuerySchema,
  MAX_SANDBOX_FILE_BYTES,
  parseSandboxSpec,
  SandboxFilePathSchema,
  SandboxIdSchema,
  SandboxReadPathSchema,
} from '@cairn/contracts';
import type { EventPage, ExecRequest, ExecResult, ExecStreamLine, FileWrittenAnswer, ListSandboxesQuery, OutputStream, ProofBundle, Receipt, Sandbox, SandboxList, SandboxSpec } from '@cairn/contracts';
import { fromBase64, sha256Hex } from './bytes.js';
import type { Chains, EventsOptions, FollowOptions } from './chains.js';
import { conform } from './conform.js';
import { readBytes } from './outputs.js';
import type { Bytes, ReadOptions } from './outputs.js';
import { checked, signalOf } from './runs.js';
import { readNdjson } from './streams.js';
import { route } from './transport.js';
import type { Transport } from './transport.js';

/** What an exec reports besides its output: the stream's last `result` line. */
export type ExecSummary = Omit<Extract<ExecStreamLine, { type: 'result' }>, 'type'>;

/** An exec as the SDK takes it: an argv array (never a shell string), or the whole request. */
export type ExecInput = readonly string[] | ExecRequest;

/** `POST /v1/sandboxes` waits (at most a minute past `waitSeconds`) for the sandbox to be READY. */
const CREATE_TIMEOUT_MS = 120_000;
const FILE_TIMEOUT_MS = 120_000;

function sandboxId(id: string): string {
  const parsed = SandboxIdSchema.safeParse(id);
  if (!parsed.success) throw new CairnError('E_INPUT', `invalid sandbox id ${JSON.stringify(id.slice(0, 100))}: a sandbox id is sbx_… in [a-z0-9_-]`, { sandboxId: id.slice(0, 100) });
  return parsed.data;
}

function filePath(path: string): string {
  return checked(SandboxFilePathSchema, path, `sandbox path ${JSON.stringify(path.slice(0, 200))}`);
}

function readPath(path: string): string {
  return checked(SandboxReadPathSchema, path, `sandbox path ${JSON.stringify(path.slice(0, 200))}`);
}

function execRequest(input: ExecInput): ExecRequest {
  const request = Array.isArray(input) ? { argv: [...(input as readonly string[])] } : (input as ExecRequest);
  checked(ExecRequestSchema, request, 'exec');
  return request;
}

/** Interactive sandbox sessions: create one, exec programs, move files, destroy it; each operation a receipt on its own chain. */
export class Sandboxes {
  constructor(
    private readonly http: Transport,
    private readonly chains: Chains,
  ) {}

  /**
   * Starts a sandbox and waits until it is READY; the answer is a session to operate it with,
   * destroyed by `await using` (Symbol.asyncDispose) or `destroy()`.
   */
  async create(spec: SandboxSpec = {}, options: { idempotencyKey?: string; signal?: AbortSignal } = {}): Promise<SandboxSession> {
    parseSandboxSpec(spec);
    const headers: Record<string, string> = options.idempotencyKey === undefined ? {} : { 'idempotency-key': checked(IdempotencyKeySchema, options.idempotencyKey, 'Idempotency-Key') };
    const { method, path } = route('createSandbox');
    // A create may wait in the placement queue for room as long as its spec says (waitSeconds).
    const timeoutMs = CREATE_TIMEOUT_MS + (spec.waitSeconds ?? 0) * 1000;
    const view = await this.http.json(method, path, API_COMPONENTS.Sandbox, { json: spec, headers, timeoutMs, ...signalOf(options.signal) });
    return new SandboxSession(this, view);
  }

  /** A session for a sandbox that exists already. */
  async open(id: string): Promise<SandboxSession> {
    return new SandboxSession(this, await this.get(id));
  }

  async get(id: string, signal?: AbortSignal): Promise<Sandbox> {
    const { method, path } = route('getSandbox', { id: sandboxId(id) });
    return this.http.json(method, path, API_COMPONENTS.Sandbox, signalOf(signal));
  }

  async list(query: Partial<ListSandboxesQuery> = {}, signal?: AbortSignal): Promise<SandboxList> {
    const q = checked(ListSandboxesQuerySchema, query, 'sandbox listing');
    const { method, path } = route('listSandboxes');
    return this.http.json(method, path, API_COMPONENTS.SandboxList, { query: { ...q }, ...signalOf(signal) });
  }

  /** Destroys it (its chain is then sealed); a sandbox that has ended answers its view as it is. */
  async destroy(id: string): Promise<Sandbox> {
    const { method, path } = route('deleteSandbox', { id: sandboxId(id) });
    return this.http.json(method, path, API_COMPONENTS.Sandbox, { timeoutMs: CREATE_TIMEOUT_MS });
  }

  /** One exec, its output whole in the answer (at most 1 MiB per stream). No client timeout: the sandbox's caps bound it. */
  async exec(id: string, input: ExecInput, signal?: AbortSignal): Promise<ExecResult> {
    const { method, path } = route('execSandbox', { id: sandboxId(id) });
    return this.http.json(method, path, API_COMPONENTS.ExecResult, { json: execRequest(input), timeoutMs: null, ...signalOf(signal) });
  }

  /**
   * One exec streamed (NDJSON): `onOutput` gets each chunk of stdout and stderr as the program
   * writes it; resolves with the result line. An `error` line, or a stream that ends without a
   * result, is a CairnError with the gateway's code.
   */
  async execStream(id: string, input: ExecInput, onOutput: (stream: OutputStream, bytes: Uint8Array) => void | Promise<void>, signal?: AbortSignal): Promise<ExecSummary> {
    const { method, path } = route('execSandbox', { id: sandboxId(id) });
    const where = `${method} ${path}`;
    const response = await this.http.send(method, path, { json: execRequest(input), accept: 'application/x-ndjson', timeoutMs: null, ...signalOf(signal) });
    if (response.body === null) throw new CairnError('E_INTERNAL', `${where}: the gateway answered no body`);
    for await (const value of readNdjson(response.body, where)) {
      const line = conform(ExecStreamLineSchema, value, this.http.validation, where);
      if (line.type === 'output') await onOutput(line.stream, fromBase64(line.data));
      else if (line.type === 'result') {
        const { type: _type, ...summary } = line;
        return summary;
      } else {
        const code = ErrorCodeSchema.safeParse(line.code);
        throw new CairnError(code.success ? code.data : 'E_INTERNAL', line.message, { sandboxId: id });
      }
    }
    throw new CairnError('E_INTERNAL', `${where}: the exec stream ended before its result`, { sandboxId: id });
  }

  /** Writes a file below /work, /out or /tmp (at most 16 MiB); the answer's sha256 is checked against the bytes sent. */
  async writeFile(id: string, path: string, bytes: Uint8Array, mode?: number): Promise<FileWrittenAnswer> {
    if (bytes.byteLength > MAX_SANDBOX_FILE_BYTES) throw new CairnError('E_INPUT', `a sandbox file is at most ${MAX_SANDBOX_FILE_BYTES} bytes (this one has ${bytes.byteLength})`, { path });
    const query = { path: filePath(path), ...(mode === undefined ? {} : { mode: mode.toString(8).padStart(4, '0') }) };
    const { method, path: route_ } = route('putSandboxFile', { id: sandboxId(id) });
    const written = await this.http.json(method, route_, API_COMPONENTS.FileWritten, { query, bytes, timeoutMs: FILE_TIMEOUT_MS });
    if (this.http.checkHashes) {
      const sha256 = await sha256Hex(bytes);
      if (written.sha256 !== sha256 || written.bytes !== bytes.byteLength) {
        throw new CairnError('E_INTERNAL', `the gateway recorded ${written.bytes} bytes with sha256 ${written.sha256}, but ${bytes.byteLength} bytes with sha256 ${sha256} were sent`, { ...written });
      }
    }
    return written;
  }

  /** Reads a file of a READY sandbox, any absolute path (its read is a receipt too), checked against the sha256 the gateway recorded. */
  async readFile(id: string, path: string, options: ReadOptions = {}): Promise<Bytes> {
    const { path: route_ } = route('getSandboxFile', { id: sandboxId(id) });
    return readBytes(this.http, `${route_}?${new URLSearchParams({ path: readPath(path) }).toString()}`, { maxBytes: MAX_SANDBOX_FILE_BYTES, ...options });
  }

  /** An exec's stdout or stderr as its receipt records it, also after the sandbox is gone. */
  async execOutput(id: string, execId: string, stream: OutputStream, options: ReadOptions = {}): Promise<Bytes> {
    return readBytes(this.http, route('getExecOutput', { id: sandboxId(id), execId, stream }).path, options);
  }

  async events(id: string, options: EventsOptions = {}): Promise<EventPage> {
    return this.chains.events(sandboxId(id), options);
  }

  async *follow(id: string, options: FollowOptions = {}): AsyncGenerator<Receipt> {
    yield* this.chains.follow(sandboxId(id), options);
  }

  async bundle(id: string, signal?: AbortSignal): Promise<ProofBundle> {
    return this.chains.bundle(sandboxId(id), signal);
  }
}

/**
 * One sandbox to operate: `await using sandbox = await cairn.sandboxes.create(…)` destroys it when
 * the scope ends, however it ends. `view` is its state as last answered.
 */
export class SandboxSession implements AsyncDisposable {
  readonly id: string;
  private destroyed: Promise<Sandbox> | null = null;

  constructor(
    private readonly sandboxes: Sandboxes,
    public view: Sandbox,
  ) {
    this.id = view.id;
  }

  async refresh(): Promise<Sandbox> {
    this.view = await this.sandboxes.get(this.id);
    return this.view;
  }

  async exec(input: ExecInput, signal?: AbortSignal): Promise<ExecResult> {
    return this.sandboxes.exec(this.id, input, signal);
  }

  async execStream(input: ExecInput, onOutput: (stream: OutputStream, bytes: Uint8Array) => void | Promise<void>, signal?: AbortSignal): Promise<ExecSummary> {
    return this.sandboxes.execStream(this.id, input, onOutput, signal);
  }

  async writeFile(path: string, content: Uint8Array | string, mode?: number): Promise<FileWrittenAnswer> {
    return this.sandboxes.writeFile(this.id, path, typeof content === 'string' ? new TextEncoder().encode(content) : content, mode);
  }

  async readFile(path: string, options: ReadOptions = {}): Promise<Bytes> {
    return this.sandboxes.readFile(this.id, path, options);
  }

  async execOutput(execId: string, stream: OutputStream, options: ReadOptions = {}): Promise<Bytes> {
    return this.sandboxes.execOutput(this.id, execId, stream, options);
  }

  async events(options: EventsOptions = {}): Promise<EventPage> {
    return this.sandboxes.events(this.id, options);
  }

  async bundle(): Promise<ProofBundle> {
    return this.sandboxes.bundle(this.id);
  }

  /** Destroys the sandbox once; later calls answer the same view. */
  async destroy(): Promise<Sandbox> {
    this.destroyed ??= this.sandboxes.destroy(this.id).then((view) => (this.view = view));
    return this.destroyed;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.destroy();
  }
}
