/*
 * The API key lives in sessionStorage only: it goes when the tab closes, is never put in a URL,
 * and is sent only as `Authorization: Bearer` to this same origin (the CSP's connect-src 'self').
 */

const KEY = 'cairn.apiKey';
/** The shape of a Cairn key: checked before it is stored, so a typo is caught on the sign-in page. */
export const API_KEY_PATTERN = /^cairn_[a-z2-7]{8}_[A-Za-z0-9_-]{43}$/;

export function storedApiKey(): string | null {
  try {
    return sessionStorage.getItem(KEY);
  } catch {
    return null;
  }
}

export function storeApiKey(key: string): void {
  sessionStorage.setItem(KEY, key);
}

export function forgetApiKey(): void {
  sessionStorage.removeItem(KEY);
}
