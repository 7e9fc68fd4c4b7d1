import { authHeaders, chainPath } from './api-client.js';
import type { ChainRef } from './api-client.js';
import type { Receipt } from './api-types.js';
import { createSseParser } from '@cairn/sdk/client';

export interface ReceiptStreamHandlers {
  onReceipt(receipt: Receipt): void;
  /** `live`: connected; `reconnecting`: dropped, trying again; `ended`: the gateway closed it after run.sealed. */
  onStatus(status: 'live' | 'reconnecting' | 'ended'): void;
}

const RECONNECT_MS = 1000;

/**
 * Follows a chain's receipts over SSE (`<chain path>/events/stream`: a run's or a sandbox's) with
 * fetch(), the key in the Authorization header, resuming with Last-Event-ID after a drop. Stops
 * after `run.sealed` (the last receipt of every chain), or when the returned function is called.
 */
export function followReceipts(chain: ChainRef, after: number, handlers: ReceiptStreamHandlers): () => void {
  const abort = new AbortController();
  let lastEventId = after > 0 ? `${chain.id}:${after}` : '';
  let sealed = false;

  const connect = async (): Promise<void> => {
    const headers: Record<string, string> = { accept: 'text/event-stream', ...authHeaders() };
    if (lastEventId !== '') headers['last-event-id'] = lastEventId;
    const response = await fetch(`${chainPath(chain)}/events/stream`, { headers, signal: abort.signal, credentials: 'omit', cache: 'no-store' });
    if (!response.ok || response.body === null) throw new Error(`event stream answered ${response.status}`);
    handlers.onStatus('live');
    const parser = createSseParser((message) => {
      if (message.event !== 'receipt') return;
      lastEventId = message.id;
      const receipt = JSON.parse(message.data) as Receipt;
      if (receipt.type === 'run.sealed') sealed = true;
      handlers.onReceipt(receipt);
    });
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(value);
    }
  };

  const loop = async () => {
    while (!abort.signal.aborted && !sealed) {
      try {
        await connect();
      } catch {
        if (abort.signal.aborted) return;
      }
      if (sealed || abort.signal.aborted) break;
      handlers.onStatus('reconnecting');
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
    }
    if (sealed) handlers.onStatus('ended');
  };
  void loop();
  return () => abort.abort();
}
