import { exitWithTraces, shutdownTracing, startTracing } from '@cairn/tracing';

// A reader that goes away (`cairn export … | head`) is not an error worth a stack trace.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') void exitWithTraces(0);
  else throw error;
});

// `cairn run` is where a run's trace can begin (ADR 0031): tracing, when the OTEL_* variables turn it
// on, starts before the commands (and what they load) are imported. Off, nothing is loaded.
if (process.argv[2] === 'run') await startTracing('cairn-cli');
try {
  const { runCli } = await import('./program.js');
  process.exitCode = await runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env });
} finally {
  // `cairn run` (`--wait` or not) exports its span before it exits: the flush waits at most 3 s.
  await shutdownTracing();
}

// Every command closes what it opened; should a client library still hold a socket or timer
// (a connection attempt abandoned after its timeout), it may not hold the process open.
setTimeout(() => process.exit(), 2_000).unref();
