import { createServer } from 'node:net';
import type { Socket } from 'node:net';

export interface OldNatsServer {
  /** `nats://127.0.0.1:<port>` */
  url: string;
  /** How many clients sent CONNECT. */
  connections(): number;
  close(): Promise<void>;
}

/**
 * A loopback server that speaks just enough of the NATS client protocol (INFO, CONNECT, PING/PONG) to
 * say it is `version` — how tests show that Cairn refuses a server too old for its log without
 * installing one. It answers no subscription and stores nothing.
 */
export async function startOldNatsServer(version: string): Promise<OldNatsServer> {
  const sockets = new Set<Socket>();
  let connects = 0;
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    const info = { server_id: 'OLD', server_name: 'old', version, proto: 1, go: 'go1.19', host: '127.0.0.1', port: 0, headers: true, max_payload: 1048576, jetstream: true };
    socket.write(`INFO ${JSON.stringify(info)}\r\n`);
    let pending = '';
    socket.on('data', (chunk: Buffer) => {
      pending += chunk.toString('latin1');
      let end: number;
      while ((end = pending.indexOf('\r\n')) !== -1) {
        const line = pending.slice(0, end);
        pending = pending.slice(end + 2);
        if (line.startsWith('CONNECT ')) connects++;
        if (line === 'PING') socket.write('PONG\r\n');
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    url: `nats://127.0.0.1:${address.port}`,
    connections: () => connects,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
