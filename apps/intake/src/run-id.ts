import { randomBytes } from 'node:crypto';

/** Crockford's base32, lower-case: no i, l, o, u, so ids read back unambiguously. */
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const TIME_CHARS = 10;
const RANDOM_CHARS = 16;

/**
 * `run_` + 10 characters of the time (ms, base32, so ids sort by creation) + 16 random ones
 * (80 bits). Lower-case `[0-9a-z]`, valid for `RunIdSchema` and safe as a NATS subject token.
 */
export function newRunId(now: number = Date.now(), random: Uint8Array = randomBytes(RANDOM_CHARS)): string {
  return newChainId('run', now, random);
}

/** `sbx_` + the same 26 characters: an interactive sandbox session's chain id. */
export function newSandboxId(now: number = Date.now(), random: Uint8Array = randomBytes(RANDOM_CHARS)): string {
  return newChainId('sbx', now, random);
}

function newChainId(kind: 'run' | 'sbx', now: number, random: Uint8Array): string {
  if (!Number.isSafeInteger(now) || now < 0 || now >= 32 ** TIME_CHARS) throw new RangeError(`not a time for a run id: ${now}`);
  if (random.length < RANDOM_CHARS) throw new RangeError(`a run id needs ${RANDOM_CHARS} random bytes`);
  let time = '';
  let rest = now;
  for (let i = 0; i < TIME_CHARS; i++) {
    time = ALPHABET.charAt(rest % 32) + time;
    rest = Math.floor(rest / 32);
  }
  let tail = '';
  for (let i = 0; i < RANDOM_CHARS; i++) tail += ALPHABET.charAt((random[i] ?? 0) % 32);
  return `${kind}_${time}${tail}`;
}
