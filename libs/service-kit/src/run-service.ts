import { isCairnError } from '@cairn/contracts';
import type { INestApplicationContext } from '@nestjs/common';
import { exitWithTraces } from '@cairn/tracing';
import { NestFactory } from '@nestjs/core';
import type { DynamicModule } from '@nestjs/common';
import { JsonLogger } from './json-logger.js';

export interface RunningService {
  readonly app: INestApplicationContext;
  stop(): Promise<void>;
}

/**
 * Boots a service's root module as a Nest application context (no HTTP), with JSON logs on
 * stderr and clean shutdown on SIGTERM/SIGINT. Used by every service's `main.ts` and by
 * tests that run a service in-process.
 */
export async function startService(service: string, module: DynamicModule, options: { shutdownHooks?: boolean } = {}): Promise<RunningService> {
  const app = await NestFactory.createApplicationContext(module, { logger: new JsonLogger(service, 'warn'), abortOnError: false });
  if (options.shutdownHooks === true) app.enableShutdownHooks();
  await app.init();
  let stopped: Promise<void> | null = null;
  return { app, stop: () => (stopped ??= app.close()) };
}

/**
 * `main.ts` body: start, or print what is wrong (config names the variable) and exit 1. SIGTERM
 * and SIGINT are this function's from its first line: Nest's own shutdown hooks come only once
 * every module has initialised, and a signal in between (a worker registered, its pool filling)
 * would end the process with nothing released. A signal during boot stops the service once it is
 * up; a second one while stopping changes nothing.
 */
export async function runServiceMain(service: string, build: () => DynamicModule | Promise<DynamicModule>): Promise<void> {
  const logger = new JsonLogger(service);
  let signalled: NodeJS.Signals | null = null;
  let running: RunningService | null = null;
  const shutdown = async (on: RunningService, signal: NodeJS.Signals): Promise<void> => {
    logger.write('info', 'stopping', { signal });
    try {
      await on.stop();
    } catch (error) {
      logger.write('error', 'failed to stop cleanly', { error: error instanceof Error ? error.message : String(error) });
      await exitWithTraces(1);
    }
    await exitWithTraces(0);
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled !== null) return;
    signalled = signal;
    if (running !== null) void shutdown(running, signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    running = await startService(service, await build());
    logger.write('info', 'started', { pid: process.pid });
  } catch (error) {
    logger.write('fatal', 'failed to start', { code: isCairnError(error) ? error.code : 'E_INTERNAL', error: error instanceof Error ? error.message : String(error) });
    return exitWithTraces(1);
  }
  if (signalled !== null) await shutdown(running, signalled);
}

/**
 * A server's `main.ts` tail (the gateways, the projector): on the first SIGTERM or SIGINT, `close` it,
 * flush the trace exporter (at most 3 s, ADR 0031), and exit 0 — or 1, logged, when it does not close
 * cleanly (the traces are flushed then too).
 */
export function exitOnSignals(logger: JsonLogger, close: () => Promise<void>): void {
  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    logger.write('info', 'stopping', { signal });
    void close().then(
      () => {
        logger.write('info', 'stopped', { signal });
        return exitWithTraces(0);
      },
      (error: unknown) => {
        logger.write('error', 'failed to stop cleanly', { error: error instanceof Error ? error.message : String(error) });
        return exitWithTraces(1);
      },
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

/** A server that did not start: say why (its code, never a secret), flush the traces, exit 1. */
export function exitOnStartFailure(logger: JsonLogger, error: unknown): Promise<never> {
  logger.write('fatal', 'failed to start', { code: isCairnError(error) ? error.code : 'E_INTERNAL', error: error instanceof Error ? error.message : String(error) });
  return exitWithTraces(1);
}
