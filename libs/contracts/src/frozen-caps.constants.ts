/**
 * PRODUCT.md's frozen caps (I-6): the maxima every run is held to. Policy may lower them per run,
 * never raise them, and a request over them is refused (`E_POLICY_DENIED`), never clamped.
 */
export const FROZEN_CAPS = Object.freeze({
  wallSeconds: 600,
  memoryMiB: 4096,
  pids: 256,
  diskMiB: 8192,
  runsPerJob: 6,
  jobMinutes: 90,
} as const);
export type FrozenCaps = typeof FROZEN_CAPS;

/**
 * The most attempts after the first a RunSpec may opt into (`retries`, ADR 0035): only a lost
 * worker is retried. Policy may lower it (`retries.max`), never raise it.
 */
export const MAX_RUN_RETRIES = 3;
