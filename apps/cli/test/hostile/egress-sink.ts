import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The port the sink listens on. */
export const SINK_PORT = 8080;

/**
 * A TCP sink the test owns: a container on a network the test creates, counting the connections
 * it accepts. Workloads aim at it instead of any real address; the test can reach it from the host,
 * which shows it is there to be reached.
 */
export interface EgressSink {
  ip: string;
  /** Connections accepted so far. */
  connections(): Promise<number>;
  /** Connects from the host once and waits until the sink has counted it. */
  touch(): Promise<void>;
  remove(): Promise<void>;
}

export async function startEgressSink(name: string, image: string, labels: Record<string, string>): Promise<EgressSink> {
  const labelArgs = Object.entries(labels).flatMap(([key, value]) => ['--label', `${key}=${value}`]);
  const remove = async () => {
    await run('docker', ['rm', '-f', name]).catch(() => undefined);
    await run('docker', ['network', 'rm', name]).catch(() => undefined);
  };
  try {
    await run('docker', ['network', 'create', ...labelArgs, name]);
    const script = `while :; do busybox nc -l -p ${SINK_PORT} </dev/null >/dev/null && echo x >> /tmp/connections; done`;
    await run('docker', ['run', '-d', '--name', name, '--network', name, ...labelArgs, '--entrypoint', 'sh', image, '-c', script]);
    const { stdout } = await run('docker', ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', name]);
    const ip = stdout.trim();
    if (!/^\d+\.\d+\.\d+\.\d+$/.test(ip)) throw new Error(`the sink has no IPv4 address: ${JSON.stringify(ip)}`);
    const connections = async () => Number((await run('docker', ['exec', name, 'sh', '-c', 'cat /tmp/connections 2>/dev/null | wc -l'])).stdout.trim());
    const touch = async () => {
      const before = await connections();
      const deadline = Date.now() + 10_000;
      while ((await connections()) === before) {
        if (Date.now() > deadline) throw new Error('the sink did not count a connection from the host');
        await new Promise<void>((resolve) => {
          const socket = connect({ host: ip, port: SINK_PORT }, () => socket.end());
          socket.on('close', () => resolve());
          socket.on('error', () => resolve());
        });
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    };
    return { ip, connections, touch, remove };
  } catch (error) {
    await remove();
    throw error;
  }
}
