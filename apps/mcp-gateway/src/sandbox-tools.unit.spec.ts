import { createHash } from 'node:crypto';
import { CairnError } from '@cairn/contracts';
import { sealReceipt } from '@cairn/evidence';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import type { TlogCheckpoint, TlogConsistencyProof, TlogInclusionProof } from '@cairn/contracts';
import type { Bundle, CairnSandboxes, EventPage, ExecRequest, ExecResult, FileRead, FileWritten, KeyList, Regraded, Run, RunArtifacts, Sandbox, SandboxPage, Submitted } from './cairn-rest.client.js';
import { createMcpServer } from './mcp-server.factory.js';
import { SANDBOX_TOOLS } from './sandbox-tools.js';

const SBX = 'sbx_abc123';
const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

function chain(types: string[]): Record<string, unknown>[] {
  const receipts: Record<string, unknown>[] = [];
  let prev = '0'.repeat(64);
  types.forEach((type, i) => {
    const receipt = sealReceipt(prev, { v: 1, seq: i + 1, run_id: SBX, tenant: 'default', type, actor: 'runtime', ts: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(), causation: null });
    receipts.push(receipt);
    prev = receipt.hash;
  });
  return receipts;
}

/** A port double: an in-memory sandbox with a file system and a log of what was sent. */
class FakeCairn implements CairnSandboxes {
  sent: string[] = [];
  files = new Map<string, Uint8Array>();
  state: Sandbox['state'] = 'READY';
  lieAboutHash = false;
  view(): Sandbox {
    return { id: SBX, tenant: 'default', state: this.state, image: 'cairn/sandbox-busybox:1', createdAt: '2026-01-01T00:00:00.000Z', expiresAt: '2026-01-01T01:00:00.000Z', operations: this.sent.length } as Sandbox;
  }
  createSandbox(spec: unknown, idempotencyKey?: string): Promise<Sandbox> {
    this.sent.push(`create ${JSON.stringify(spec)} ${idempotencyKey ?? '-'}`);
    return Promise.resolve(this.view());
  }
  getSandbox(): Promise<Sandbox> {
    return Promise.resolve(this.view());
  }
  listSandboxes(query: { state?: string; cursor?: string; limit?: number }): Promise<SandboxPage> {
    this.sent.push(`list ${JSON.stringify(query)}`);
    return Promise.resolve({ items: [this.view()], nextCursor: null });
  }
  exec(sandboxId: string, request: ExecRequest): Promise<ExecResult> {
    if (sandboxId !== SBX) return Promise.reject(new CairnError('E_NOT_FOUND', `no sandbox ${sandboxId}`));
    if (this.state !== 'READY') return Promise.reject(new CairnError('E_CONFLICT', `sandbox ${sandboxId} is ${this.state}`, { state: this.state }));
    this.sent.push(`exec ${JSON.stringify(request)}`);
    const stdout = request.argv.join(' ');
    return Promise.resolve({
      execId: 'exec_1',
      exitCode: 0,
      stdout,
      stderr: '',
      stdoutBytes: stdout.length,
      stderrBytes: 0,
      stdoutSha256: sha(Buffer.from(stdout)),
      stderrSha256: sha(Buffer.alloc(0)),
      truncated: false,
      durationMs: 3,
      limitHit: null,
      errorCode: null,
      seq: 6,
      sandboxState: 'READY',
    });
  }
  writeFile(_sandboxId: string, path: string, bytes: Uint8Array, mode?: number): Promise<FileWritten> {
    this.sent.push(`write ${path} ${bytes.length} ${mode?.toString(8) ?? '-'}`);
    this.files.set(path, bytes);
    return Promise.resolve({ path, bytes: bytes.length, sha256: this.lieAboutHash ? 'f'.repeat(64) : sha(bytes), seq: 7 });
  }
  readFile(sandboxId: string, path: string): Promise<FileRead> {
    const bytes = this.files.get(path);
    if (bytes === undefined) return Promise.reject(new CairnError('E_NOT_FOUND', `no file ${path} in ${sandboxId}`));
    return Promise.resolve({ bytes, sha256: this.lieAboutHash ? 'f'.repeat(64) : sha(bytes), contentType: 'application/octet-stream', seq: 8 });
  }
  receipts = chain(['sandbox.requested', 'policy.decided', 'run.scheduled', 'sandbox.created', 'sandbox.exec.completed', 'sandbox.destroyed', 'run.sealed']);
  sandboxBundle(sandboxId: string): Promise<Bundle> {
    return Promise.resolve({ format: 'cairn.bundle/v1', runId: sandboxId, receipts: this.receipts, verdict: null, grade: null, headHash: null } as unknown as Bundle);
  }
  destroySandbox(): Promise<Sandbox> {
    this.state = 'DESTROYED';
    this.sent.push('destroy');
    return Promise.resolve(this.view());
  }
  // The run side of the port, unused here.
  submitRun(): Promise<Submitted> {
    return Promise.reject(new Error('unused'));
  }
  regrade(): Promise<Regraded> {
    return Promise.reject(new Error('unused'));
  }
  getRun(): Promise<Run> {
    return Promise.reject(new Error('unused'));
  }
  events(): Promise<EventPage> {
    return Promise.reject(new Error('unused'));
  }
  bundle(): Promise<Bundle> {
    return Promise.reject(new Error('unused'));
  }
  artifacts(): Promise<RunArtifacts> {
    return Promise.reject(new Error('unused'));
  }
  output(): Promise<FileRead> {
    return Promise.reject(new Error('unused'));
  }
  artifact(): Promise<FileRead> {
    return Promise.reject(new Error('unused'));
  }
  listKeys(): Promise<KeyList> {
    return Promise.resolve({ items: [] });
  }
  checkpoint(): Promise<TlogCheckpoint> {
    this.sent.push('checkpoint');
    return Promise.resolve({ checkpoint: 'cairn/x\n1\n' + 'A'.repeat(43) + '=\n\n', origin: 'cairn/x', size: 1, rootHash: `${'A'.repeat(43)}=` });
  }
  inclusion(chainId: string): Promise<TlogInclusionProof> {
    this.sent.push(`inclusion ${chainId}`);
    if (chainId !== SBX) return Promise.reject(new CairnError('E_NOT_FOUND', `${chainId} is not sealed`, { reason: 'not_sealed' }));
    return Promise.resolve({ chainId, leafIndex: 0, treeSize: 1, leafHash: `${'A'.repeat(43)}=`, hashes: [], checkpoint: 'note' });
  }
  consistency(from: number, to: number): Promise<TlogConsistencyProof> {
    this.sent.push(`consistency ${from} ${to}`);
    if (from > to) return Promise.reject(new CairnError('E_INPUT', 'from is larger than to'));
    return Promise.resolve({ from, to, hashes: [] });
  }
}

/** The real server over an in-memory transport, driven by the SDK's own client. */
async function connected(cairn: FakeCairn): Promise<{ client: Client; call: (name: string, args: Record<string, unknown>) => Promise<CallToolResult> }> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const server = createMcpServer(cairn);
  await server.connect(serverSide);
  const client = new Client({ name: 'unit', version: '1' });
  await client.connect(clientSide);
  return { client, call: async (name, args) => (await client.callTool({ name, arguments: args })) as CallToolResult };
}

describe('the key tools', () => {
  it('list the tenant\'s keys, read only; there is no tool that creates, rotates or revokes one', async () => {
    const { client, call } = await connected(new FakeCairn());
    const { tools } = await client.listTools();
    const keyTools = tools.filter((t) => t.name.startsWith('keys_'));
    expect(keyTools.map((t) => [t.name, t.annotations?.readOnlyHint])).toEqual([['keys_list', true]]);
    const listed = await call('keys_list', {});
    expect(listed.isError).not.toBe(true);
    expect(listed.structuredContent).toEqual({ items: [] });
    expect((await call('keys_list', { tenant: 'other' })).isError).toBe(true);
    await client.close();
  });
});

describe('the log tools', () => {
  it('serve the checkpoint and the proofs as REST answers them, read only, refusing bad arguments before anything is sent', async () => {
    const cairn = new FakeCairn();
    const { client, call } = await connected(cairn);
    const { tools } = await client.listTools();
    expect(tools.filter((t) => t.name.startsWith('tlog_')).map((t) => [t.name, t.annotations?.readOnlyHint])).toEqual([
      ['tlog_checkpoint', true],
      ['tlog_inclusion_proof', true],
      ['tlog_consistency_proof', true],
    ]);
    expect((await call('tlog_checkpoint', {})).structuredContent).toMatchObject({ origin: 'cairn/x', size: 1 });
    expect((await call('tlog_inclusion_proof', { chain: SBX })).structuredContent).toMatchObject({ chainId: SBX, leafIndex: 0 });
    const unsealed = await call('tlog_inclusion_proof', { chain: 'run_nope' });
    expect(unsealed.isError).toBe(true);
    expect(JSON.stringify(unsealed.structuredContent)).toContain('E_NOT_FOUND');
    expect((await call('tlog_consistency_proof', { from: 1, to: 3 })).structuredContent).toEqual({ from: 1, to: 3, hashes: [] });
    const backwards = await call('tlog_consistency_proof', { from: 3, to: 1 });
    expect(JSON.stringify(backwards.structuredContent)).toContain('E_INPUT');
    const before = cairn.sent.length;
    for (const [name, args] of [['tlog_inclusion_proof', { chain: 'adm_default' }], ['tlog_consistency_proof', { from: -1, to: 2 }], ['tlog_checkpoint', { extra: 1 }]] as const) {
      const refused = await call(name, args);
      expect(refused.isError, name).toBe(true);
      expect(JSON.stringify(refused.structuredContent), name).toContain('E_INPUT');
    }
    expect(cairn.sent.length).toBe(before);
    await client.close();
  });
});

describe('the sandbox tools', () => {
  it('are listed beside the run tools, each with an object input schema', async () => {
    const { client } = await connected(new FakeCairn());
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['keys_list', 'run_artifact', 'run_events', 'run_outputs', 'run_regrade', 'run_status', 'run_submit', 'run_verify', 'sandbox_create', 'sandbox_destroy', 'sandbox_exec', 'sandbox_list', 'sandbox_read_file', 'sandbox_verify', 'sandbox_write_file', 'tlog_checkpoint', 'tlog_consistency_proof', 'tlog_inclusion_proof']);
    for (const tool of SANDBOX_TOOLS) expect(tool.definition.inputSchema.type).toBe('object');
    const exec = tools.find((t) => t.name === 'sandbox_exec')?.inputSchema as { required: string[]; properties: Record<string, unknown> };
    expect(exec.required.sort()).toEqual(['argv', 'sandboxId']);
    const create = tools.find((t) => t.name === 'sandbox_create')?.inputSchema as { properties: Record<string, unknown> };
    expect(Object.keys(create.properties)).toEqual(expect.arrayContaining(['image', 'caps', 'network', 'ttlSeconds', 'idempotencyKey']));
    await client.close();
  });

  it('a session: create, write, exec, read, destroy — results as text and structured content', async () => {
    const cairn = new FakeCairn();
    const { client, call } = await connected(cairn);
    const created = await call('sandbox_create', { image: 'cairn/sandbox-busybox:1', ttlSeconds: 600, idempotencyKey: 'k1' });
    expect(created.isError).toBeFalsy();
    expect(created.structuredContent).toMatchObject({ id: SBX, state: 'READY' });
    expect(JSON.parse((created.content[0] as { text: string }).text)).toEqual(created.structuredContent);

    const written = await call('sandbox_write_file', { sandboxId: SBX, path: '/work/hi.sh', content: 'echo hi\n', mode: '0755' });
    expect(written.structuredContent).toMatchObject({ sandboxId: SBX, path: '/work/hi.sh', bytes: 8, sha256: sha(Buffer.from('echo hi\n')), seq: 7 });
    const binary = await call('sandbox_write_file', { sandboxId: SBX, path: '/work/b.bin', content: Buffer.from([0xff, 0, 1]).toString('base64'), encoding: 'base64' });
    expect(binary.structuredContent).toMatchObject({ bytes: 3 });

    const ran = await call('sandbox_exec', { sandboxId: SBX, argv: ['sh', '/work/hi.sh'], env: { GREETING: 'x' }, workdir: '/work', stdin: 'in', timeoutSeconds: 5 });
    expect(ran.structuredContent).toMatchObject({ sandboxId: SBX, exitCode: 0, stdout: 'sh /work/hi.sh', seq: 6 });

    expect((await call('sandbox_read_file', { sandboxId: SBX, path: '/work/hi.sh' })).structuredContent).toMatchObject({ encoding: 'utf8', content: 'echo hi\n', bytes: 8, seq: 8 });
    // Bytes that are not UTF-8 come back as base64, and say so.
    expect((await call('sandbox_read_file', { sandboxId: SBX, path: '/work/b.bin' })).structuredContent).toMatchObject({ encoding: 'base64', content: '/wAB' });
    expect((await call('sandbox_read_file', { sandboxId: SBX, path: '/work/hi.sh', encoding: 'base64' })).structuredContent).toMatchObject({ encoding: 'base64', content: Buffer.from('echo hi\n').toString('base64') });

    expect((await call('sandbox_list', { state: 'READY' })).structuredContent).toMatchObject({ items: [{ id: SBX }], nextCursor: null });
    expect((await call('sandbox_destroy', { sandboxId: SBX })).structuredContent).toMatchObject({ id: SBX, state: 'DESTROYED' });
    const after = await call('sandbox_exec', { sandboxId: SBX, argv: ['true'] });
    expect(after).toMatchObject({ isError: true, structuredContent: { error: { code: 'E_CONFLICT', details: { state: 'DESTROYED' } } } });
    expect(cairn.sent).toEqual([
      'create {"image":"cairn/sandbox-busybox:1","ttlSeconds":600} k1',
      'write /work/hi.sh 8 755',
      'write /work/b.bin 3 -',
      'exec {"argv":["sh","/work/hi.sh"],"env":{"GREETING":"x"},"workdir":"/work","stdin":"in","timeoutSeconds":5}',
      'list {"limit":50,"state":"READY"}',
      'destroy',
    ]);
    await client.close();
  });

  it.each([
    ['sandbox_create', { image: 'cairn/sandbox-busybox:1', privileged: true }, 'privileged'],
    ['sandbox_create', { network: 'host' }, 'network'],
    ['sandbox_create', { caps: { memoryMiB: -1 } }, 'caps.memoryMiB'],
    ['sandbox_exec', { sandboxId: SBX, argv: 'rm -rf /' }, 'argv'],
    ['sandbox_exec', { sandboxId: SBX, argv: [] }, 'argv'],
    ['sandbox_exec', { sandboxId: SBX, argv: ['ls'], workdir: '/etc' }, 'workdir'],
    ['sandbox_exec', { sandboxId: 'sbx_\u0430bc', argv: ['ls'] }, 'sandboxId'],
    ['sandbox_exec', { sandboxId: 'run_abc', argv: ['ls'] }, 'sandboxId'],
    ['sandbox_write_file', { sandboxId: SBX, path: '/etc/passwd', content: 'x' }, 'path'],
    ['sandbox_write_file', { sandboxId: SBX, path: '/work/../etc/passwd', content: 'x' }, 'path'],
    ['sandbox_write_file', { sandboxId: SBX, path: '/work/a', content: 'x', mode: '4755' }, 'mode'],
    ['sandbox_write_file', { sandboxId: SBX, path: '/work/a', content: 'not base64!', encoding: 'base64' }, 'content'],
    ['sandbox_read_file', { sandboxId: SBX, path: 'relative/path' }, 'path'],
    ['sandbox_destroy', { sandboxId: SBX, force: true }, 'force'],
    ['sandbox_list', { limit: 0 }, 'limit'],
  ])('%s %j is E_INPUT naming %s, and nothing is sent', async (name, args, field) => {
    const cairn = new FakeCairn();
    const { client, call } = await connected(cairn);
    const result = await call(name, args);
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ error: { code: 'E_INPUT', message: expect.stringContaining(field) as string } });
    expect(cairn.sent).toEqual([]);
    await client.close();
  });

  it('a hash the gateway reports that does not match the bytes is an error, not a result', async () => {
    const cairn = new FakeCairn();
    cairn.lieAboutHash = true;
    const { client, call } = await connected(cairn);
    expect((await call('sandbox_write_file', { sandboxId: SBX, path: '/work/a', content: 'x' })).structuredContent).toMatchObject({ error: { code: 'E_INTERNAL' } });
    expect((await call('sandbox_read_file', { sandboxId: SBX, path: '/work/a' })).structuredContent).toMatchObject({ error: { code: 'E_INTERNAL' } });
    expect((await call('sandbox_read_file', { sandboxId: SBX, path: '/work/none' })).structuredContent).toMatchObject({ error: { code: 'E_NOT_FOUND' } });
    await client.close();
  });
});

describe('sandbox_verify', () => {
  it('recomputes the sandbox chain here: ok with its head; an edited receipt is E_CHAIN_BROKEN at its seq', async () => {
    const cairn = new FakeCairn();
    const { client, call } = await connected(cairn);
    const ok = await call('sandbox_verify', { sandboxId: SBX });
    expect(ok.structuredContent).toMatchObject({ ok: true, sandboxId: SBX, count: 7, headSeq: 7, headHash: cairn.receipts[6]!.hash, sealed: true });
    cairn.receipts[4] = { ...cairn.receipts[4], exit_code: 0 };
    const broken = await call('sandbox_verify', { sandboxId: SBX });
    expect(broken).toMatchObject({ isError: true, structuredContent: { error: { code: 'E_CHAIN_BROKEN', details: { firstBadSeq: 5, reason: 'hash_mismatch' } } } });
    await client.close();
  });

  it('a sandbox chain that records its own break (ADR 0033) is E_CHAIN_BROKEN break_recorded at the alert, though its receipts verify', async () => {
    const cairn = new FakeCairn();
    cairn.receipts = chain(['sandbox.requested', 'policy.decided', 'run.scheduled', 'sandbox.created', 'alert.raised', 'sandbox.destroyed', 'run.sealed']);
    // Re-hashed from the alert on, so every receipt still verifies.
    let prev = cairn.receipts[3]!.hash as string;
    for (let i = 4; i < cairn.receipts.length; i++) {
      const { prev_hash: _p, hash: _h, ...body } = cairn.receipts[i]!;
      cairn.receipts[i] = sealReceipt(prev, i === 4 ? { ...body, severity: 'critical', error_code: 'E_CHAIN_BROKEN', message: 'the message at stream seq 8 is not a receipt' } : body);
      prev = cairn.receipts[i]!.hash as string;
    }
    const { client, call } = await connected(cairn);
    const broken = await call('sandbox_verify', { sandboxId: SBX });
    expect(broken).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'E_CHAIN_BROKEN', message: expect.stringContaining('seq 5 that it was broken: the message at stream seq 8 is not a receipt') as string, details: { runId: SBX, firstBadSeq: 5, reason: 'break_recorded', verified: 7 } } },
    });
    await client.close();
  });
});
