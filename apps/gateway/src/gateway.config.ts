import { ArtifactBucketConfigSchema, DatabaseConfigSchema, EvidenceLogConfigSchema, SecretCatalogConfigSchema, TlogConfigSchema } from '@cairn/config';
import { OperationalConfigSchema } from '@cairn/operational';
import { DEFAULT_STALE_AFTER_MS } from '@cairn/scheduling';
import { z } from 'zod';
import { API_KEY_PATTERN } from './auth/api-key.codec.js';

/** A host name or IP literal to listen on; the default keeps the gateway on loopback. */
const listenHost = z.string().regex(/^[A-Za-z0-9.:-]{1,255}$/, 'a host name or IP address');

/** The gateway's whole configuration, read once from the environment at boot. */
export const GatewayConfigSchema = EvidenceLogConfigSchema.extend(DatabaseConfigSchema.shape)
  .extend(SecretCatalogConfigSchema.shape)
  .extend(OperationalConfigSchema.shape)
  .extend(TlogConfigSchema.shape)
  .extend({
    CAIRN_GATEWAY_HOST: listenHost.default('127.0.0.1'),
    /** 0 picks a free port (tests). */
    CAIRN_GATEWAY_PORT: z.coerce.number().int().min(0).max(65_535).default(7410),
    /** Optional bootstrap key: ensured at boot as an admin key of tenant `default` (only its hash is stored). */
    CAIRN_API_KEY: z.string().regex(API_KEY_PATTERN, 'an API key of the form cairn_<8-char prefix>_<secret>').optional(),
    /** The bootstrap key from a file instead (mode 0600, this process's user's; compose and Kubernetes secrets): never both. */
    CAIRN_API_KEY_FILE: z.string().min(1).optional(),
    /** How long a submit or cancel waits for intake's reply before answering E_UNAVAILABLE. */
    CAIRN_GATEWAY_COMMAND_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
    /** After a new submission, how long to wait for the run to be projected so a GET right after the 202 finds it (0: do not wait). */
    CAIRN_GATEWAY_SUBMIT_WAIT_MS: z.coerce.number().int().min(0).max(30_000).default(2_000),
    /** How often an event stream polls the projection for new receipts. */
    CAIRN_GATEWAY_SSE_POLL_MS: z.coerce.number().int().min(20).max(10_000).default(200),
    /** How often an idle event stream sends a comment, so proxies and clients see it alive. */
    CAIRN_GATEWAY_SSE_HEARTBEAT_MS: z.coerce.number().int().min(50).max(300_000).default(15_000),
    /**
     * The operator's AES key file (mode 0600; `cairn up` makes one): seals webhook signing secrets,
     * and opens what is left of the secret store in PostgreSQL, once, to move it to the catalog.
     */
    CAIRN_SECRETS_KEY_FILE: z.string().min(1).optional(),
    /**
     * The deployment's secrets public key file (ADR 0028; `cairn up` makes it): secret values are
     * sealed to it. There is deliberately no setting for the private key: the gateway cannot open
     * a value. Absent: the secret routes answer E_UNAVAILABLE.
     */
    CAIRN_SECRETS_PUBLIC_KEY_FILE: z.string().min(1).optional(),
    /** The seal public keys file (`cairn up` writes it beside the grader's key): served at GET /.well-known/cairn/keys. */
    CAIRN_SEAL_PUBLIC_KEYS_FILE: z.string().min(1).optional(),
    /** Event streams open at once; past it a new one is E_RATE_LIMITED. */
    CAIRN_GATEWAY_MAX_STREAMS: z.coerce.number().int().min(1).max(100_000).default(256),
    /**
     * Requests per second each API key may make, sustained (a token bucket per key id); past it
     * 429 E_RATE_LIMITED with Retry-After. Generous by default: the test suites and benchmarks
     * stay far below it; an operator lowers it for keys handed to agents.
     */
    CAIRN_GATEWAY_RATE_LIMIT_PER_SECOND: z.coerce.number().min(0.01).max(1_000_000).default(100),
    /** Requests one key may send at once before the sustained rate applies (the bucket's size). */
    CAIRN_GATEWAY_RATE_LIMIT_BURST: z.coerce.number().int().min(1).max(1_000_000).default(500),
    /** The dashboard's build (index.html and assets/); absent: the `dist/` of the @cairn/dashboard workspace. */
    CAIRN_DASHBOARD_DIR: z.string().min(1).optional(),
    /** The policy document the policy service runs with (the same variable); absent: the built-in default. Read by GET /v1/policy. */
    CAIRN_POLICY_FILE: z.string().min(1).optional(),
    /** The runtime's artifact object store, where the outputs routes read a run's stdout, stderr and files over NATS (as the kernel does). */
    CAIRN_ARTIFACT_BUCKET: ArtifactBucketConfigSchema.shape.CAIRN_ARTIFACT_BUCKET,
    /** The largest output served (a step's stream, a file); a larger one is 413 E_TOO_LARGE. Served streamed: memory stays bounded either way. */
    CAIRN_GATEWAY_ARTIFACT_MAX_BYTES: z.coerce.number().int().min(1).max(16 * 1024 * 1024 * 1024).default(256 * 1024 * 1024),
    /** How long `/metrics` reuses what it read from PostgreSQL and NATS: scrapes stay cheap however often they come. */
    CAIRN_GATEWAY_METRICS_CACHE_MS: z.coerce.number().int().min(0).max(300_000).default(5_000),
    /** How long `/metrics` waits for one source (a query, the stream info, the registry); a late one keeps its last values. */
    CAIRN_GATEWAY_METRICS_TIMEOUT_MS: z.coerce.number().int().min(50).max(60_000).default(2_000),
    /** When a silent worker counts as stale in `/v1/workers` and `/metrics`: the scheduler's own setting, so both agree. */
    CAIRN_WORKER_STALE_AFTER_MS: z.coerce.number().int().min(1000).max(3_600_000).default(DEFAULT_STALE_AFTER_MS),
  })
  .refine((config) => config.CAIRN_API_KEY === undefined || config.CAIRN_API_KEY_FILE === undefined, {
    path: ['CAIRN_API_KEY_FILE'],
    message: 'set CAIRN_API_KEY or CAIRN_API_KEY_FILE, not both',
  });
export type GatewayConfig = z.infer<typeof GatewayConfigSchema>;

/** Request bodies above this are refused with 413 E_TOO_LARGE before they are parsed. */
export const BODY_LIMIT_BYTES = 1024 * 1024;
