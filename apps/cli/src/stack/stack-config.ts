import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { isolatedNames, loadConfig } from '@cairn/config';
import { z } from 'zod';

/*
 * One Cairn stack on this machine: the services `cairn up` starts and the names they share. A
 * stack id (CAIRN_STACK_ID) gives a stack its own streams, buckets (its artifact object store
 * among them) and worker id, so tests and benchmarks run isolated stacks beside the default one.
 */

/**
 * Every process of a stack, in start order (the gateway last: its health covers the others). The
 * MCP gateway is a client of the REST gateway: it needs it only when a request comes. The
 * webhooks service reacts to the evidence stream and sends deliveries; its tables are its own.
 */
export const STACK_SERVICES = ['projector', 'intake', 'policy', 'scheduler', 'runtime', 'kernel', 'verifier', 'grader', 'webhooks', 'mcp-gateway', 'gateway'] as const;
export type StackService = (typeof STACK_SERVICES)[number];

export function isStackService(name: string): name is StackService {
  return (STACK_SERVICES as readonly string[]).includes(name);
}

/** The secret store's key file under the state directory (made by `cairn up` when absent). */
export const SECRETS_KEY_FILE = 'secrets.key';

/** The deployment's secrets keypair (ADR 0028): the private half for the runtime workers (mode 0600), the public half for the gateway. */
export const SECRETS_PRIVATE_KEY_FILE = 'secrets-box.key';
export const SECRETS_PUBLIC_KEY_FILE = 'secrets-box.pub';

/** The seal signing key (mode 0600, read by the grader) and its public keys file (served by the gateway), under the state directory. */
export const SEAL_KEY_FILE = 'seal.key';
export const SEAL_PUBLIC_KEYS_FILE = 'seal-keys.pub';

/** The gateway's port when nothing else is asked for. */
export const DEFAULT_GATEWAY_PORT = 7420;

/** The MCP gateway's (Streamable HTTP) port when nothing else is asked for. */
export const DEFAULT_MCP_PORT = 7421;

/** Variables that hold a credential: never written to the stack file, never given to a service but the gateway. */
export const SECRET_VARIABLES = ['CAIRN_API_KEY'] as const;

export const StackSettingsSchema = z.object({
  /** The state directory: stack file, API key, logs, artifacts. */
  CAIRN_HOME: z.string().min(1).optional(),
  /** Names an isolated stack; absent means the default stack and the default names. */
  CAIRN_STACK_ID: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]{0,39}$/, 'a stack id is [a-z0-9_-], at most 40 characters, starting with a letter or digit')
    .optional(),
  /** 0 picks a free port when the stack starts. */
  CAIRN_GATEWAY_PORT: z.coerce.number().int().min(0).max(65_535).default(DEFAULT_GATEWAY_PORT),
  /** The MCP endpoint's port; 0 picks a free one. Unset: 7421, or a free one when CAIRN_GATEWAY_PORT is 0. */
  CAIRN_MCP_PORT: z.coerce.number().int().min(0).max(65_535).optional(),
});
export type StackSettings = z.infer<typeof StackSettingsSchema>;

export interface StackLocation {
  /** Absolute state directory. */
  home: string;
  stackId: string;
}

/** Where the stack's state lives: CAIRN_HOME, else ~/.cairn. */
export function stackHome(env: NodeJS.ProcessEnv): string {
  const settings = loadConfig(StackSettingsSchema, env);
  return resolve(settings.CAIRN_HOME ?? join(homedir(), '.cairn'));
}

export function stackLocation(env: NodeJS.ProcessEnv): StackLocation {
  const settings = loadConfig(StackSettingsSchema, env);
  return { home: stackHome(env), stackId: settings.CAIRN_STACK_ID ?? 'default' };
}

/**
 * The configuration every service of the stack is started with: the caller's CAIRN_* variables
 * (tuning such as lease TTLs passes straight through), the isolated names where unset, and the
 * paths under the state dir. Secrets are left out: the API key reaches only the
 * gateway, and only at start.
 */
export function stackServiceConfig(env: NodeJS.ProcessEnv, location: StackLocation, gatewayPort: number, mcpPort?: number): Record<string, string> {
  const config: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (!key.startsWith('CAIRN_') || value === undefined || value === '') continue;
    if ((SECRET_VARIABLES as readonly string[]).includes(key) || key === 'CAIRN_URL') continue;
    config[key] = value;
  }
  if (location.stackId !== 'default') {
    for (const [key, value] of Object.entries(isolatedNames(location.stackId))) config[key] ??= value;
    config.CAIRN_STACK_ID = location.stackId;
  }
  config.CAIRN_HOME = location.home;
  // Where older stacks kept artifacts: the runtime uploads what is there once (docs/adr/0021) and writes nothing to it.
  config.CAIRN_ARTIFACT_DIR = resolve(location.home, config.CAIRN_ARTIFACT_DIR ?? 'artifacts');
  // The runtime's id and its lock: one worker per stack home and stack.
  config.CAIRN_WORKER_STATE_DIR = resolve(location.home, config.CAIRN_WORKER_STATE_DIR ?? (location.stackId === 'default' ? 'worker' : `worker-${location.stackId}`));
  // A path, not a secret: the file (mode 0600) holds the key that seals the secret store's values.
  config.CAIRN_SECRETS_KEY_FILE = resolve(location.home, config.CAIRN_SECRETS_KEY_FILE ?? SECRETS_KEY_FILE);
  // Paths, not keys: the runtime workers open secret values with the private key; the gateway seals to the public one.
  config.CAIRN_SECRETS_PRIVATE_KEY_FILE = resolve(location.home, config.CAIRN_SECRETS_PRIVATE_KEY_FILE ?? SECRETS_PRIVATE_KEY_FILE);
  config.CAIRN_SECRETS_PUBLIC_KEY_FILE = resolve(location.home, config.CAIRN_SECRETS_PUBLIC_KEY_FILE ?? SECRETS_PUBLIC_KEY_FILE);
  // Paths, not keys: the grader reads the private key at boot, the gateway only the public keys file.
  config.CAIRN_SEAL_KEY_FILE = resolve(location.home, config.CAIRN_SEAL_KEY_FILE ?? SEAL_KEY_FILE);
  config.CAIRN_SEAL_PUBLIC_KEYS_FILE = resolve(location.home, config.CAIRN_SEAL_PUBLIC_KEYS_FILE ?? SEAL_PUBLIC_KEYS_FILE);
  config.CAIRN_GATEWAY_PORT = String(gatewayPort);
  if (mcpPort !== undefined) config.CAIRN_MCP_PORT = String(mcpPort);
  return config;
}

/** The evidence-log variables of a stack, for commands that read the log (`export`, `projections`). */
export const EVIDENCE_VARIABLES = ['CAIRN_NATS_URL', 'CAIRN_NATS_REPLICAS', 'CAIRN_NATS_CREDS_FILE', 'CAIRN_EVIDENCE_STREAM', 'CAIRN_EVIDENCE_SUBJECT_PREFIX', 'CAIRN_DATABASE_URL'] as const;
