import { CairnError, MAX_SECRET_BYTES, MIN_SECRET_BYTES, SecretNameSchema } from '@cairn/contracts';

/*
 * What a secret is: a name (the RunSpec's `SecretNameSchema`) and a UTF-8 text value of bounded
 * size. Errors name the rule, never the value (I-7).
 */

/** The value's bounds are the REST contract's (@cairn/contracts), named here too for the store's users. */
export { MAX_SECRET_BYTES, MIN_SECRET_BYTES };

/** The name, checked; E_INPUT naming the rule otherwise. */
export function checkSecretName(name: string): string {
  const parsed = SecretNameSchema.safeParse(name);
  if (!parsed.success) throw new CairnError('E_INPUT', `invalid secret name ${JSON.stringify(name.slice(0, 80))}: a secret name is [A-Z_][A-Z0-9_]*, at most 64 characters`, { field: 'name' });
  return parsed.data;
}

/**
 * A value as the store takes it: UTF-8 text without NUL, MIN_SECRET_BYTES..MAX_SECRET_BYTES bytes.
 * Returns the bytes unchanged. Too large is E_TOO_LARGE; anything else E_INPUT.
 */
export function checkSecretValue(value: Uint8Array): Uint8Array {
  if (value.length > MAX_SECRET_BYTES) {
    throw new CairnError('E_TOO_LARGE', `a secret value is at most ${MAX_SECRET_BYTES} bytes (this one has ${value.length})`, { maxBytes: MAX_SECRET_BYTES });
  }
  if (value.length < MIN_SECRET_BYTES) {
    throw new CairnError('E_INPUT', `a secret value needs at least ${MIN_SECRET_BYTES} bytes, so that it can be told apart from ordinary output (this one has ${value.length})`, {
      minBytes: MIN_SECRET_BYTES,
    });
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(value);
  } catch {
    throw new CairnError('E_INPUT', 'a secret value must be UTF-8 text (base64-encode binary values)');
  }
  if (text.includes('\u0000')) throw new CairnError('E_INPUT', 'a secret value may not contain NUL');
  return value;
}

/** The last four characters (code points) of a value, which is all a listing shows of it. */
export function lastFour(value: Uint8Array): string {
  const chars = [...new TextDecoder('utf-8').decode(value)];
  return chars.slice(-4).join('');
}

/**
 * One trailing line break (what `echo` and editors add) is not part of the value: the CLI and the
 * REST route both drop it (LF or CRLF), and nothing else.
 */
export function withoutTrailingNewline(bytes: Uint8Array): Uint8Array {
  let end = bytes.length;
  if (end > 0 && bytes[end - 1] === 0x0a) end--;
  if (end > 0 && bytes[end - 1] === 0x0d && end === bytes.length - 1) end--;
  return bytes.subarray(0, end);
}
