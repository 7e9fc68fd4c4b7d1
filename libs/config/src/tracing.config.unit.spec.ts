import { describe, expect, it } from 'vitest';
import { loadConfig } from './load-config.js';
import { otelEnvironment, TracingConfigSchema, tracingEnabled } from './tracing.config.js';

const enabled = (env: Record<string, string>) => tracingEnabled(loadConfig(TracingConfigSchema, env));

describe('tracing settings (ADR 0031)', () => {
  it('is off unless an exporter or an endpoint is set', () => {
    expect(enabled({})).toBe(false);
    expect(enabled({ OTEL_SERVICE_NAME: 'cairn', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toBe(false);
    expect(enabled({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toBe(true);
    expect(enabled({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example/v1/traces' })).toBe(true);
    expect(enabled({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
    expect(enabled({ OTEL_TRACES_EXPORTER: 'console' })).toBe(true);
  });

  it('is off when the exporter is none or the SDK disabled, whatever else is set', () => {
    expect(enabled({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toBe(false);
    expect(enabled({ OTEL_TRACES_EXPORTER: 'otlp,none' })).toBe(false);
    expect(enabled({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' })).toBe(false);
    expect(enabled({ OTEL_SDK_DISABLED: 'false', OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
  });

  it.each([
    ['OTEL_TRACES_EXPORTER', 'zipkin'],
    ['OTEL_EXPORTER_OTLP_PROTOCOL', 'grpc'],
    ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'grpc'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'not a url'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'ftp://127.0.0.1:4318'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'http://user:pass@127.0.0.1:4318'],
    ['OTEL_TRACES_SAMPLER', 'sometimes'],
    ['OTEL_TRACES_SAMPLER_ARG', '2'],
    ['OTEL_SDK_DISABLED', 'yes'],
    ['OTEL_SERVICE_NAME', 'a name with spaces'],
  ])('refuses %s=%s at boot, naming the variable and not its value', (name, value) => {
    try {
      loadConfig(TracingConfigSchema, { [name]: value });
      expect.unreachable();
    } catch (error) {
      expect(error).toMatchObject({ code: 'E_INPUT', details: { variables: [name] } });
      if (value.includes('pass')) expect(String((error as Error).message)).not.toContain('pass@');
    }
  });

  it('hands a launcher’s OTEL_* variables on, but not one service name for every process', () => {
    expect(otelEnvironment({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_SERVICE_NAME: 'x', CAIRN_HOME: '/h', PATH: '/bin' })).toEqual({ OTEL_TRACES_EXPORTER: 'otlp' });
  });
});
