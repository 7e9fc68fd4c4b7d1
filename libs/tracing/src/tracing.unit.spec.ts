import { context, trace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { activeTraceHeaders, activeTraceIds, injectTraceHeaders, inSpan, parentFromHeaders, settleWithin, SHUTDOWN_FLUSH_MS, shutdownTracing, startTracing, tracingActive } from './tracing.js';

// The off switch: with no exporter named, nothing of the SDK starts and nothing is added anywhere.
describe('tracing off', () => {
  it('starts nothing without an exporter or endpoint, or with the SDK disabled or the exporter none', async () => {
    for (const env of [
      {},
      { OTEL_SERVICE_NAME: 'x' },
      { OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' },
      { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' },
    ]) {
      const handle = await startTracing('cairn-test', env);
      expect(handle.enabled).toBe(false);
      expect(tracingActive()).toBe(false);
    }
    expect(trace.getTracerProvider().getTracer('x').startSpan('probe').isRecording()).toBe(false);
  });

  it('adds no header, makes no span and no log ids', async () => {
    const set: [string, string][] = [];
    injectTraceHeaders({ set: (name, value) => set.push([name, value]) });
    expect(set).toEqual([]);
    expect(activeTraceHeaders()).toEqual({});
    const seen = await inSpan('work', {}, (span) => {
      expect(activeTraceIds()).toBeUndefined();
      return Promise.resolve(span);
    });
    expect(seen).toBeNull();
    // A received traceparent is not even parsed.
    const parent = parentFromHeaders({ get: () => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' });
    expect(parent).toBe(context.active());
  });

  it('still runs the work and passes its failure on', async () => {
    await expect(inSpan('fails', {}, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  });

  it('refuses malformed OTEL_* settings at boot, naming them', async () => {
    await expect(startTracing('cairn-test', { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_TRACES_EXPORTER: 'otlp' })).rejects.toMatchObject({
      code: 'E_INPUT',
      details: { variables: ['OTEL_EXPORTER_OTLP_PROTOCOL'] },
    });
    await expect(startTracing('cairn-test', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://user:secret@127.0.0.1:4318' })).rejects.toMatchObject({ code: 'E_INPUT' });
    await expect(startTracing('cairn-test', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://user:secret@127.0.0.1:4318' })).rejects.not.toThrow(/secret/);
    expect(tracingActive()).toBe(false);
  });
});

// The exit's flush (ADR 0031): bounded, so a collector that never answers cannot hold a process.
describe('the flush on exit', () => {
  it('waits for the work when it settles first', async () => {
    const started = Date.now();
    let done = false;
    await settleWithin(
      new Promise<void>((resolve) =>
        setTimeout(() => {
          done = true;
          resolve();
        }, 20),
      ),
      5_000,
    );
    expect(done).toBe(true);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('gives up after the bound on work that never settles, and never rejects', async () => {
    const started = Date.now();
    await settleWithin(new Promise(() => undefined), 100);
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThanOrEqual(95);
    expect(waited).toBeLessThan(1_000);
    await expect(settleWithin(Promise.reject(new Error('exporter down')), 1_000)).resolves.toBeUndefined();
  });

  it('is 3 s, and nothing to flush when tracing is off', async () => {
    expect(SHUTDOWN_FLUSH_MS).toBe(3_000);
    const started = Date.now();
    await shutdownTracing();
    expect(Date.now() - started).toBeLessThan(100);
  });
});
