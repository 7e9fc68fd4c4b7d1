import { Cairn, canHash } from '@cairn/sdk/client';
import { forgetApiKey, storedApiKey } from './session.js';

/*
 * @cairn/sdk's browser-safe client, for what the pages read through it (a run's outputs): the
 * same origin, the signed-in key read afresh for each request, no cookies, no cache. A refused key
 * signs the page out, as api-client.ts does. Bytes are checked against their sha256 here when the
 * page has WebCrypto (a secure context); the gateway has checked them against the chain either way.
 */

let onUnauthorized: () => void = () => undefined;
export function setSdkUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

export const checksHere = canHash();

export const cairn = new Cairn({
  url: '',
  apiKey: storedApiKey,
  retries: 0,
  checkHashes: checksHere,
  requestInit: { credentials: 'omit', cache: 'no-store' },
  onError: (error) => {
    if (error.code === 'E_UNAUTHORIZED' && storedApiKey() !== null) {
      forgetApiKey();
      onUnauthorized();
    }
  },
});
