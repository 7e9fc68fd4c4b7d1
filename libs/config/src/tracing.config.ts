import { z } from 'zod';

/**
 * The standard `OTEL_*` variables Cairn reads itself to decide whether tracing is on (ADR 0031).
 * The SDK reads the rest (batching, timeouts, headers); these are the ones whose mistakes must stop
 * a process at boot rather than leave it exporting nowhere: OTLP goes over HTTP only.
 */
const httpUrl = z
  .url({ protocol: /^https?$/, error: 'an http:// or https:// URL' })
  .refine((value) => {
    if (!URL.canParse(value)) return true;
    const url = new URL(value);
    return url.username === '' && url.password === '';
  }, 'a URL without credentials (send them with OTEL_EXPORTER_OTLP_HEADERS)');

const exporters = z
  .string()
  .regex(/^\s*(otlp|console|none)\s*(,\s*(otlp|console|none)\s*)*$/, 'a comma-separated list of otlp, console, none')
  .transform((value) => value.split(',').map((name) => name.trim()));

export const TracingConfigSchema = z.object({
  OTEL_SDK_DISABLED: z.enum(['true', 'false'], { error: 'true or false' }).optional(),
  OTEL_TRACES_EXPORTER: exporters.optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl.optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: httpUrl.optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: z.enum(['http/json', 'http/protobuf'], { error: 'http/json or http/protobuf (OTLP over HTTP)' }).optional(),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z.enum(['http/json', 'http/protobuf'], { error: 'http/json or http/protobuf (OTLP over HTTP)' }).optional(),
  OTEL_SERVICE_NAME: z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'a service name ([A-Za-z0-9_.:-], at most 128)').optional(),
  OTEL_TRACES_SAMPLER: z
    .enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'], {
      error: 'one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio',
    })
    .optional(),
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number({ error: 'a number from 0 to 1' }).min(0).max(1).optional(),
});
export type TracingConfig = z.infer<typeof TracingConfigSchema>;

/**
 * Whether this process traces: only when an exporter is named (`OTEL_TRACES_EXPORTER` other than
 * `none`) or an OTLP endpoint is set, and the SDK is not disabled. Off is the default, and off
 * means no SDK at all.
 */
export function tracingEnabled(config: TracingConfig): boolean {
  if (config.OTEL_SDK_DISABLED === 'true') return false;
  const named = config.OTEL_TRACES_EXPORTER;
  if (named !== undefined && named.length > 0) return !named.includes('none');
  return config.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined || config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined;
}

/** The `OTEL_*` variables a launcher (`cairn up`) hands on to the processes it starts. */
export function otelEnvironment(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (key.startsWith('OTEL_') && key !== 'OTEL_SERVICE_NAME' && value !== undefined) out[key] = value;
  return out;
}
