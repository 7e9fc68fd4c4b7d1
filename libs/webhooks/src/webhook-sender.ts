import { request as httpRequest } from 'node:http';
import type { IncomingMessage, RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import type { CheckedUrl } from './url-guard.js';

export interface SendOutcome {
  /** The HTTP status, or null when no response came (refused, reset, timed out). */
  status: number | null;
  /** Why it failed, short; null on a 2xx. */
  error: string | null;
  durationMs: number;
}

/** A lookup that answers the address already checked, so the connection goes nowhere else. */
function pinnedLookup(target: CheckedUrl): LookupFunction {
  const first = target.addresses[0]!;
  return (_hostname, options, callback) => {
    if (typeof options === 'object' && options.all === true) {
      (callback as unknown as (err: null, addresses: { address: string; family: number }[]) => void)(null, [{ address: first.address, family: first.family }]);
    } else {
      callback(null, first.address, first.family);
    }
  };
}

/**
 * POSTs `body` to a checked URL, connecting only to its checked address, following no redirect
 * (a 3xx is a failure), giving up after `timeoutMs`. The response body is read (at most 64 KiB)
 * and dropped. Never throws.
 */
export function sendWebhook(target: CheckedUrl, headers: Record<string, string>, body: string, timeoutMs: number): Promise<SendOutcome> {
  const started = performance.now();
  const done = (status: number | null, error: string | null): SendOutcome => ({ status, error, durationMs: Math.round(performance.now() - started) });
  return new Promise((resolve) => {
    const options: RequestOptions = {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'Cairn-Webhooks/1' },
      lookup: pinnedLookup(target),
      timeout: timeoutMs,
      agent: false,
    };
    const send = target.url.protocol === 'https:' ? httpsRequest : httpRequest;
    let settled = false;
    const finish = (outcome: SendOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      resolve(outcome);
    };
    const req = send(target.url, options, (res: IncomingMessage) => {
      let seen = 0;
      res.on('data', (chunk: Buffer) => {
        seen += chunk.length;
        if (seen > 64 * 1024) res.destroy();
      });
      const status = res.statusCode ?? 0;
      const ok = status >= 200 && status < 300;
      const outcome = done(status, ok ? null : `HTTP ${status}`);
      res.on('end', () => finish(outcome));
      res.on('close', () => finish(outcome));
      res.on('error', () => finish(outcome));
    });
    // The socket timeout covers idleness; this covers the whole exchange.
    const deadline = setTimeout(() => {
      req.destroy(new Error(`timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('timeout', () => req.destroy(new Error(`timed out after ${timeoutMs} ms`)));
    req.on('error', (error: NodeJS.ErrnoException) => finish(done(null, (error.code ?? error.message).slice(0, 200))));
    req.end(body);
  });
}
