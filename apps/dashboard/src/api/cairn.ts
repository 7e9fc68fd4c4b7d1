import { Cairn, canHash, isCairnError, statusOf } from '@cairn/sdk/client';
import type { CairnOptions } from '@cairn/sdk/client';
import type { Receipt } from './api-types.js';
import { forgetApiKey, storedApiKey } from './session.js';

/*
 * The one way the pages reach the API: @cairn/sdk's browser-safe client, on the page's own origin,
 * the signed-in key read afresh for each request, no cookies, no cache, no retries (the lists
 * refresh by themselves). A refused key signs the page out. Bytes read back are checked against
 * their sha256 here when the page has WebCrypto (a secure context); the gateway has checked them
 * against the chain either way.
 */

/** Called when the gateway refuses the key (401 E_UNAUTHORIZED): the app goes back to the sign-in page. */
let onUnauthorized: () => void = () => undefined;
export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

export const checksHere = canHash();

const PAGE_OPTIONS = {
  url: '',
  retries: 0,
  checkHashes: checksHere,
  requestInit: { credentials: 'omit', cache: 'no-store' },
} satisfies Omit<CairnOptions, 'apiKey'>;

export const cairn = new Cairn({
  ...PAGE_OPTIONS,
  apiKey: storedApiKey,
  onError: (error) => {
    if ((error.code === 'E_UNAUTHORIZED' || statusOf(error) === 401) && storedApiKey() !== null) {
      forgetApiKey();
      onUnauthorized();
    }
  },
});

/**
 * Checks a key typed in on the sign-in page before it is kept: one cheap keyed read with that key,
 * by a client of its own (its refusal is the form's to show, not a sign-out).
 */
export async function checkKey(key: string): Promise<void> {
  await new Cairn({ ...PAGE_OPTIONS, apiKey: () => key }).runs.list({ limit: 1 });
}

/** Every stored receipt of a chain (`run_…`, `sbx_…`), page by page. */
export async function allReceipts(chainId: string): Promise<Receipt[]> {
  const all: Receipt[] = [];
  for await (const receipt of cairn.chains.allEvents(chainId)) all.push(receipt);
  return all;
}

/** How a page shows a failure: the API's `E_CODE: message`, or `fallback` for anything else. */
export function errorLine(error: unknown, fallback: (other: unknown) => string = String): string {
  return isCairnError(error) ? `${error.code}: ${error.message}` : fallback(error);
}

export { isCairnError, statusOf };
