import { runCli } from './program.js';

// A reader that goes away (`cairn export … | head`) is not an error worth a stack trace.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

process.exitCode = await runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env });

// Every command closes what it opened; should a client library still hold a socket or timer
// (a connection attempt abandoned after its timeout), it may not hold the process open.
setTimeout(() => process.exit(), 2_000).unref();
