import { uniqueName } from '@cairn/testing';
import { chmod, copyFile, link, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_EGRESS_PROXY_USER, DEFAULT_SANDBOX_USER, EgressProxyProcess, staticResolver } from '../src/index.js';
import type { EgressDenial, EgressProxyProcessOptions } from '../src/index.js';
import { codeOf, pidAlive } from './sandbox.fixture.js';

/*
 * The egress proxy as a process of its own, on loopback (no sandbox needed): who it runs as, what
 * the runtime hears from it, and what happens when it dies or talks nonsense. The sandbox-facing
 * side (tunnels, refusals, teardown) is egress.int.spec.ts.
 */

const root = process.getuid?.() === 0;
const user = root ? DEFAULT_EGRESS_PROXY_USER : null;
let scratch = '';

function options(extra: Partial<EgressProxyProcessOptions> = {}): EgressProxyProcessOptions & { denials: EgressDenial[]; lost: string[] } {
  const denials: EgressDenial[] = [];
  const lost: string[] = [];
  return {
    listenHost: '127.0.0.1',
    allow: ['sink.test:9'],
    allowPrivate: false,
    resolver: staticResolver(new Map([['sink.test', ['192.0.2.1']]])),
    clientSubnet: '127.0.0.0/8',
    user,
    onDenied: (d) => denials.push(d),
    onLost: (reason) => lost.push(reason),
    denials,
    lost,
    ...extra,
  };
}

/** Sends `text` to 127.0.0.1:port and gathers the answer until the connection ends (or 3 s pass). */
function exchange(port: number, text: string): Promise<{ answer: string; error: string | null }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    const done = (error: string | null) => resolve({ answer: Buffer.concat(chunks).toString('latin1'), error });
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
    socket.on('close', () => done(null));
    setTimeout(() => {
      socket.destroy();
      done('timeout');
    }, 3000);
  });
}

async function until(test: () => boolean, ms = 5000): Promise<void> {
  for (const started = Date.now(); !test(); ) {
    if (Date.now() - started > ms) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A stand-in proxy program (it runs as whoever starts it: it does not drop root as the real one does). */
async function fakeEntry(source: string): Promise<string> {
  const path = join(scratch, `${uniqueName('fake')}.mjs`);
  await writeFile(path, source);
  await chmod(path, 0o644);
  return path;
}

beforeAll(async () => {
  scratch = await mkdtemp('/tmp/cairn-egress-proc-');
  await chmod(scratch, 0o755);
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('the egress proxy process', () => {
  it('runs as a child of the runtime, as a user of its own (neither root nor the sandbox user), with nothing of its environment', async () => {
    const opts = options();
    const proxy = await EgressProxyProcess.start(opts);
    try {
      const status = await readFile(`/proc/${proxy.pid}/status`, 'utf8');
      expect(Number(/^PPid:\s+(\d+)/m.exec(status)?.[1])).toBe(process.pid);
      const uids = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status)!.slice(1).map(Number);
      const gids = /^Gid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status)!.slice(1).map(Number);
      if (root) {
        expect(uids).toEqual([65_530, 65_530, 65_530, 65_530]);
        expect(gids).toEqual([65_530, 65_530, 65_530, 65_530]);
        expect(/^Groups:\s*$/m.test(status)).toBe(true);
      }
      for (const id of [...uids, ...gids]) expect([0, DEFAULT_SANDBOX_USER.uid, DEFAULT_SANDBOX_USER.gid]).not.toContain(id);
      const environ = await readFile(`/proc/${proxy.pid}/environ`, 'utf8');
      expect(environ).toBe('');

      // What the sandbox sends is parsed there; the runtime hears the refusal, nothing more.
      const refused = await exchange(proxy.port, 'CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n');
      expect(refused.answer).toMatch(/^HTTP\/1\.1 403 /);
      await until(() => opts.denials.length === 1);
      expect(opts.denials).toEqual([{ host: 'evil.test', port: 443, reason: 'not_allowlisted' }]);
      // A refusal is reported before it is answered, so a flush after the answer has heard it.
      const again = await exchange(proxy.port, 'GET http://other.test:9/ HTTP/1.1\r\nHost: other.test:9\r\n\r\n');
      expect(again.answer).toMatch(/^HTTP\/1\.1 403 /);
      await proxy.flush();
      expect(opts.denials.at(-1)).toEqual({ host: 'other.test', port: 9, reason: 'not_allowlisted' });
      const garbage = await exchange(proxy.port, 'CONNECT \u0000\u0001 nonsense\r\n\r\n');
      expect(garbage.answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(proxy.alive).toBe(true);
    } finally {
      await proxy.close();
    }
    expect(await pidAlive(proxy.pid!)).toBe(false);
    expect((await exchange(proxy.port, 'x')).error).toBe('ECONNREFUSED');
    expect(opts.lost).toEqual([]);
  });

  it('starts from where only root may go (a checkout under a 0700 directory): it gives up root itself, once loaded', async () => {
    // The node binary in a directory only its owner may enter, as in `/root/…` or under `mktemp -d`.
    const closed = join(scratch, uniqueName('closed'));
    await mkdir(closed, { mode: 0o700 });
    const execPath = join(closed, 'node');
    await link(process.execPath, execPath).catch(() => copyFile(process.execPath, execPath));
    const opts = options({ execPath });
    const proxy = await EgressProxyProcess.start(opts);
    try {
      const status = await readFile(`/proc/${proxy.pid}/status`, 'utf8');
      const uids = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status)!.slice(1).map(Number);
      expect(uids).toEqual(Array(4).fill(root ? DEFAULT_EGRESS_PROXY_USER.uid : process.getuid!()));
      expect((await exchange(proxy.port, 'CONNECT evil.test:443 HTTP/1.1\r\n\r\n')).answer).toMatch(/^HTTP\/1\.1 403 /);
    } finally {
      await proxy.close();
    }
    expect(opts.lost).toEqual([]);
  });

  it('fails closed when it dies: the port is held and every connection dropped unread, and the owner is told once', async () => {
    const opts = options();
    const proxy = await EgressProxyProcess.start(opts);
    process.kill(proxy.pid!, 'SIGKILL');
    await until(() => opts.lost.length === 1);
    expect(opts.lost[0]).toContain('SIGKILL');
    expect(proxy.alive).toBe(false);
    await proxy.flush(); // at once: nothing is there to answer
    const after = await exchange(proxy.port, 'CONNECT sink.test:9 HTTP/1.1\r\n\r\n');
    expect(after.answer).toBe('');
    expect(after.error === 'ECONNRESET' || after.error === null).toBe(true);
    await proxy.close();
    expect((await exchange(proxy.port, 'x')).error).toBe('ECONNREFUSED');
    expect(opts.lost).toHaveLength(1);
  });

  it('stops a proxy that sends anything but its messages, or a line too long', async () => {
    const listenThen = (then: string) =>
      fakeEntry(
        `import { createServer } from 'node:net';\n` +
          `const s = createServer(); s.listen(0, '127.0.0.1', () => { process.stdout.write(JSON.stringify({ t: 'listening', port: s.address().port }) + '\\n'); ${then} });\n` +
          `process.stdin.resume();\n`,
      );
    for (const [then, says] of [
      [`process.stdout.write('{"t":"exec","argv":["sh"]}\\n');`, 'not one of its messages'],
      [`process.stdout.write('x'.repeat(5000));`, 'longer than 1024'],
      [`process.stdout.write(JSON.stringify({ t: 'denied', host: '../../etc', port: 1, reason: 'not_allowlisted' }) + '\\n');`, 'not one of its messages'],
    ] as const) {
      const opts = options({ entry: await listenThen(then) });
      const proxy = await EgressProxyProcess.start(opts);
      await until(() => opts.lost.length === 1);
      expect(opts.lost[0]).toContain(says);
      expect(opts.denials).toEqual([]);
      await until(() => !proxy.alive);
      await proxy.close();
      expect(await pidAlive(proxy.pid!)).toBe(false);
    }
  });

  it('refuses to start a proxy that does not listen (E_SANDBOX_START), leaving nothing running', async () => {
    const exits = await fakeEntry(`process.stderr.write('cannot bind'); process.exit(3);\n`);
    expect(await codeOf(EgressProxyProcess.start(options({ entry: exits })))).toBe('E_SANDBOX_START');
    const fails = await fakeEntry(`process.stdout.write(JSON.stringify({ t: 'failed', message: 'no such address' }) + '\\n'); process.stdin.resume();\n`);
    await expect(EgressProxyProcess.start(options({ entry: fails }))).rejects.toMatchObject({ cairnErrorCode: 'E_SANDBOX_START', message: expect.stringContaining('no such address') as string });
    // The real one, on an address this host does not have.
    expect(await codeOf(EgressProxyProcess.start(options({ listenHost: '192.0.2.77' })))).toBe('E_SANDBOX_START');
    if (root) expect(await codeOf(EgressProxyProcess.start(options({ user: null })))).toBe('E_SANDBOX_START');
  });
});
