import type { Receipt } from './api-types.js';
import { cairn } from './cairn.js';

export interface ReceiptStreamHandlers {
  onReceipt(receipt: Receipt): void;
  /** `live`: connected; `reconnecting`: dropped, trying again; `ended`: the gateway closed it after run.sealed. */
  onStatus(status: 'live' | 'reconnecting' | 'ended'): void;
}

const RETRY_MS = 1000;

/**
 * Follows a chain's receipts (a run's `run_…` or a sandbox's `sbx_…`) with @cairn/sdk's `follow`:
 * SSE over fetch, the key in the Authorization header, resumed after the last seq on a drop. Where
 * the SDK gives up (the gateway away too long, an error answer) the page keeps trying, from the last
 * receipt it has. Stops after `run.sealed` (the last receipt of every chain), or when the returned
 * function is called.
 */
export function followReceipts(chainId: string, after: number, handlers: ReceiptStreamHandlers): () => void {
  const abort = new AbortController();
  let last = after;
  let sealed = false;

  const loop = async () => {
    while (!abort.signal.aborted && !sealed) {
      try {
        for await (const receipt of cairn.chains.follow(chainId, { after: last, signal: abort.signal, onStatus: (status) => handlers.onStatus(status) })) {
          last = receipt.seq;
          if (receipt.type === 'run.sealed') sealed = true;
          handlers.onReceipt(receipt);
        }
      } catch {
        // Tried again below, unless stopped.
      }
      if (sealed || abort.signal.aborted) break;
      handlers.onStatus('reconnecting');
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
    if (sealed) handlers.onStatus('ended');
  };
  void loop();
  return () => abort.abort();
}
