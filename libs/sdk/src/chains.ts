import { CairnError, isCairnError, ProofBundleSchema } from '@cairn/contracts';
import type { EventPage, ProofBundle, Receipt } from '@cairn/contracts';
import { z } from 'zod';
import { wireReceipt } from './conform.js';
import { readSse } from './sse.js';
import type { Transport } from './transport.js';

/*
 * A chain's receipts, whoever's chain it is (a run's `run_…`, a sandbox's `sbx_…`, a tenant's admin
 * chain `adm_…`): pages of them, a live stream of them with resume, and its proof bundle. Receipts
 * come through exactly as stored, so `verifyChain` can recompute every hash.
 */

/** Where a chain's routes are: `/v1/runs/<id>`, `/v1/sandboxes/<id>`, `/v1/tenants/<tenant>`. */
export function chainBase(chainId: string): string {
  if (chainId.startsWith('adm_')) return `/v1/tenants/${encodeURIComponent(chainId.slice('adm_'.length))}`;
  return `/v1/${chainId.startsWith('sbx_') ? 'sandboxes' : 'runs'}/${encodeURIComponent(chainId)}`;
}

const PageEnvelopeSchema = z.strictObject({ items: z.array(z.unknown()), nextAfter: z.number().int().min(0).nullable() });
const BundleEnvelopeSchema = ProofBundleSchema.omit({ receipts: true }).extend({ receipts: z.array(z.unknown()) });

export interface FollowOptions {
  /** Receipts after this seq (default 0: from the start). */
  after?: number;
  signal?: AbortSignal;
  /** How long the gateway may stay unreachable before the stream gives up (default 30 s). */
  patienceMs?: number;
  /** `live` on each (re)connection, `reconnecting` when it dropped and is tried again. */
  onStatus?: (status: 'live' | 'reconnecting') => void;
}

export interface EventsOptions {
  after?: number;
  /** At most this many receipts per page (1–1000; the gateway's default 100). */
  limit?: number;
  signal?: AbortSignal;
}

const RECONNECT_MS = 500;

export class Chains {
  constructor(private readonly http: Transport) {}

  /** One page of the chain's receipts after `after`, and where the next starts (null: the end for now). */
  async events(chainId: string, options: EventsOptions = {}): Promise<EventPage> {
    const path = `${chainBase(chainId)}/events`;
    const page = await this.http.json('GET', path, PageEnvelopeSchema, {
      query: { after: options.after ?? 0, limit: options.limit },
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    return { items: page.items.map((item) => wireReceipt(item, `GET ${path}`, this.http.validation)), nextAfter: page.nextAfter };
  }

  /** Every receipt of the chain after `after`, page by page. */
  async *allEvents(chainId: string, options: Omit<EventsOptions, 'limit'> = {}): AsyncGenerator<Receipt> {
    let after: number | null = options.after ?? 0;
    while (after !== null) {
      const page = await this.events(chainId, { after, limit: 1000, ...(options.signal === undefined ? {} : { signal: options.signal }) });
      yield* page.items;
      after = page.items.length === 0 ? null : page.nextAfter;
    }
  }

  /** The chain's proof bundle (`cairn.bundle/v1`), its receipts as stored. */
  async bundle(chainId: string, signal?: AbortSignal): Promise<ProofBundle> {
    const path = `${chainBase(chainId)}/bundle`;
    const bundle = await this.http.json('GET', path, BundleEnvelopeSchema, { timeoutMs: 120_000, ...(signal === undefined ? {} : { signal }) });
    return { ...bundle, receipts: bundle.receipts.map((item) => wireReceipt(item, `GET ${path}`, this.http.validation)) };
  }

  /**
   * One connection to the chain's SSE stream after `after`: its receipts until the gateway closes
   * it. `onOpen` is called once the gateway has accepted it, before any receipt.
   */
  async *streamOnce(chainId: string, after: number, signal?: AbortSignal, onOpen?: () => void): AsyncGenerator<Receipt> {
    const path = `${chainBase(chainId)}/events/stream`;
    const response = await this.http.send('GET', path, {
      query: { after },
      accept: 'text/event-stream',
      headers: { 'last-event-id': `${chainId}:${after}` },
      timeoutMs: null,
      ...(signal === undefined ? {} : { signal }),
    });
    onOpen?.();
    if (response.body === null) return;
    for await (const message of readSse(response.body)) {
      if (message.event !== 'receipt') continue;
      let data: unknown;
      try {
        data = JSON.parse(message.data);
      } catch {
        throw new CairnError('E_INTERNAL', `the event stream of ${chainId} carried data that is not JSON`);
      }
      yield wireReceipt(data, `GET ${path}`, this.http.validation);
    }
  }

  /**
   * Every receipt of the chain after `after`, in order, as it is appended, until `run.sealed`
   * (the last receipt of a run's and a sandbox's chain). A dropped stream is resumed after the
   * last seq seen (`Last-Event-ID`), so nothing is skipped or repeated; it gives up only when the
   * gateway stays unreachable for `patienceMs`. Stops quietly when `signal` aborts.
   */
  async *follow(chainId: string, options: FollowOptions = {}): AsyncGenerator<Receipt> {
    let last = options.after ?? 0;
    let failingSince: number | null = null;
    const patience = options.patienceMs ?? 30_000;
    for (;;) {
      try {
        // Live as soon as the gateway accepts the stream: an open chain may be quiet for long.
        const opened = () => {
          failingSince = null;
          options.onStatus?.('live');
        };
        for await (const receipt of this.streamOnce(chainId, last, options.signal, opened)) {
          if (receipt.seq <= last) continue;
          last = receipt.seq;
          yield receipt;
          if (receipt.type === 'run.sealed') return;
        }
        failingSince = null;
      } catch (error) {
        if (options.signal?.aborted === true) return;
        if (!isCairnError(error) || error.code !== 'E_UNAVAILABLE') throw error;
        failingSince ??= Date.now();
        if (Date.now() - failingSince > patience) throw error;
      }
      if (options.signal?.aborted === true) return;
      options.onStatus?.('reconnecting');
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
    }
  }
}
