import { Cairn } from '@cairn/sdk';

/*
 * The CLI talks to the REST gateway through @cairn/sdk, the one client of the REST contract. A
 * refusal is reported as it comes, never retried behind the user's back (a rate limit says when to
 * come back in its message); no gateway answering says how to start one.
 */

export const START_HINT = 'start the stack with `npx --no-install cairn up` (or set CAIRN_URL and CAIRN_API_KEY)';

export function cairnClient(url: string, apiKey: string | null): Cairn {
  return new Cairn({ url, apiKey, retries: 0, unreachableHint: START_HINT });
}
