import { z } from 'zod';

/** A Cairn API key, as the REST gateway issues them (`cairn_<8-char prefix>_<secret>`). */
export const API_KEY_PATTERN = /^cairn_[a-z2-7]{8}_[A-Za-z0-9_-]{43}$/;

/** The hosts a local MCP endpoint answers to unless told otherwise (DNS-rebinding protection). */
export const DEFAULT_ALLOWED_HOSTS = ['localhost', '127.0.0.1', '[::1]'] as const;

const hostList = z
  .string()
  .transform((value) => value.split(',').map((host) => host.trim().toLowerCase()))
  .pipe(z.array(z.string().regex(/^(\[[0-9a-f:.]+\]|[a-z0-9.-]{1,253})$/, 'a comma-separated list of host names (no ports; IPv6 in brackets)')).min(1));

const originList = z
  .string()
  .transform((value) => value.split(',').map((origin) => origin.trim().toLowerCase()))
  .pipe(z.array(z.string().regex(/^https?:\/\/[^\s/]+$/, 'a comma-separated list of origins (scheme://host[:port])')).min(1));

const httpUrl = z.string().regex(/^https?:\/\/[^\s]+$/, 'an http:// or https:// URL');

/** The MCP gateway's whole configuration, read once from the environment at boot. */
export const McpGatewayConfigSchema = z.object({
  /** `http`: Streamable HTTP on CAIRN_MCP_HOST:CAIRN_MCP_PORT; `stdio`: one session on stdin/stdout. */
  CAIRN_MCP_TRANSPORT: z.enum(['http', 'stdio']).default('http'),
  /** The Cairn REST gateway every tool call goes through (with the caller's key). */
  CAIRN_MCP_UPSTREAM_URL: httpUrl,
  /** stdio only: the key the one session acts with. Over HTTP each request brings its own (Authorization: Bearer). */
  CAIRN_API_KEY: z.string().regex(API_KEY_PATTERN, 'an API key of the form cairn_<8-char prefix>_<secret>').optional(),
  CAIRN_MCP_HOST: z.string().regex(/^[A-Za-z0-9.:-]{1,255}$/, 'a host name or IP address').default('127.0.0.1'),
  /** 0 picks a free port. */
  CAIRN_MCP_PORT: z.coerce.number().int().min(0).max(65_535).default(7421),
  /** Host header names (port-agnostic) the HTTP endpoint answers to; anything else is 403. */
  CAIRN_MCP_ALLOWED_HOSTS: hostList.default([...DEFAULT_ALLOWED_HOSTS]),
  /** Origins allowed besides http(s) origins on an allowed host; a request with any other Origin is 403. */
  CAIRN_MCP_ALLOWED_ORIGINS: originList.optional(),
  /** Open HTTP sessions at once; past it a new session is refused (503). */
  CAIRN_MCP_MAX_SESSIONS: z.coerce.number().int().min(1).max(100_000).default(256),
  /** An HTTP session nobody used for this long is closed. */
  CAIRN_MCP_SESSION_IDLE_MS: z.coerce.number().int().min(1_000).max(86_400_000).default(30 * 60_000),
  /**
   * Requests per second one API key may send to the HTTP endpoint, sustained (a token bucket per
   * key); past it 429 E_RATE_LIMITED with Retry-After. Each tool call is charged again by the REST
   * gateway's own limit, so this bounds what a key costs the MCP gateway itself.
   */
  CAIRN_MCP_RATE_LIMIT_PER_SECOND: z.coerce.number().min(0.01).max(1_000_000).default(100),
  /** Requests one key may send at once before the sustained rate applies. */
  CAIRN_MCP_RATE_LIMIT_BURST: z.coerce.number().int().min(1).max(1_000_000).default(500),
});
export type McpGatewayConfig = z.infer<typeof McpGatewayConfigSchema>;

/** Request bodies above this are refused with 413 before they are parsed. */
export const MCP_BODY_LIMIT_BYTES = 2 * 1024 * 1024;
