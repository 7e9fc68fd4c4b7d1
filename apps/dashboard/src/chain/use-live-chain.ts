import { useEffect, useRef, useState } from 'react';
import { allReceipts } from '../api/cairn.js';
import type { Receipt } from '../api/api-types.js';
import { followReceipts } from '../api/receipt-stream.js';
import { checkedBadge } from './badge-view.js';
import type { BadgeState } from './badge-view.js';
import { verifyChain, webCryptoAvailable } from './verify-chain.js';

export type LiveStatus = 'loading' | 'live' | 'reconnecting' | 'ended' | 'idle';

export interface LiveChain<H> {
  /** The projection's view of the chain's owner (a run, a sandbox), re-read as receipts arrive. */
  head: H | null;
  receipts: Receipt[];
  error: unknown;
  live: LiveStatus;
  badge: BadgeState;
  /** Whether the chain was still open when the page loaded (so its end was watched live). */
  openedUnsealed: boolean | null;
  reloadHead: () => void;
}

export interface LiveChainSource<H> {
  /** The chain's id: a run's `run_…`, a sandbox's `sbx_…`. */
  chain: string;
  loadHead: () => Promise<H>;
  /** The projection's receipt count and head hash, compared with the page's own when the counts agree. */
  serverHead: (head: H) => { count: number; hash: string; sealed: boolean };
}

const sealedIn = (receipts: readonly Receipt[]) => receipts.some((receipt) => receipt.type === 'run.sealed');

/**
 * A chain loaded from `<chain>/events`, then followed live over SSE until `run.sealed`, and
 * re-verified in this browser after every receipt, its recorded breaks read again with it (the
 * chain badge's state).
 */
export function useLiveChain<H>(source: LiveChainSource<H>): LiveChain<H> {
  const { chain, loadHead, serverHead } = source;
  const [head, setHead] = useState<H | null>(null);
  const [receipts, setReceipts] = useState<Receipt[]>([]);
  const [error, setError] = useState<unknown>(undefined);
  const [live, setLive] = useState<LiveStatus>('loading');
  const [badge, setBadge] = useState<BadgeState>({ kind: 'checking' });
  const [openedUnsealed, setOpenedUnsealed] = useState<boolean | null>(null);
  const timer = useRef<number | undefined>(undefined);
  const loader = useRef(loadHead);
  loader.current = loadHead;

  const reloadHead = () => {
    window.clearTimeout(timer.current);
    timer.current = window.setTimeout(() => void loader.current().then(setHead, () => undefined), 150);
  };

  useEffect(() => {
    let stop: (() => void) | undefined;
    let cancelled = false;
    setHead(null);
    setReceipts([]);
    setError(undefined);
    setLive('loading');
    setBadge({ kind: 'checking' });
    (async () => {
      const [first, stored] = await Promise.all([loader.current(), allReceipts(chain)]);
      if (cancelled) return;
      setHead(first);
      setReceipts(stored);
      setOpenedUnsealed(!sealedIn(stored));
      if (sealedIn(stored)) {
        setLive('idle');
        return;
      }
      stop = followReceipts(chain, stored.at(-1)?.seq ?? 0, {
        onReceipt: (receipt) => {
          // Only the next receipt in chain order joins; a repeat after a reconnect is dropped.
          setReceipts((previous) => (receipt.seq === (previous.at(-1)?.seq ?? 0) + 1 ? [...previous, receipt] : previous));
          reloadHead();
        },
        onStatus: (status) => {
          setLive(status);
          if (status === 'ended') reloadHead();
        },
      });
    })().catch((failure: unknown) => !cancelled && setError(failure));
    return () => {
      cancelled = true;
      stop?.();
      window.clearTimeout(timer.current);
    };
  }, [chain]);

  // The projection may lag the stream by a moment: read the head again until it agrees the chain is sealed.
  useEffect(() => {
    if (!sealedIn(receipts) || head === null || serverHead(head).sealed) return undefined;
    const id = window.setTimeout(() => void loader.current().then(setHead, () => undefined), 400);
    return () => window.clearTimeout(id);
  }, [receipts, head, serverHead]);

  // Re-verify the whole chain whenever it grows (tens of receipts: milliseconds).
  useEffect(() => {
    if (receipts.length === 0) return undefined;
    if (!webCryptoAvailable()) {
      setBadge({ kind: 'unavailable' });
      return undefined;
    }
    let stale = false;
    verifyChain(receipts, chain).then(
      (check) => {
        // The server's head only when its projection holds these receipts; a break the chain records of itself with them.
        if (!stale) setBadge(checkedBadge(check, receipts, head === null ? null : serverHead(head)));
      },
      () => !stale && setBadge({ kind: 'unavailable' }),
    );
    return () => {
      stale = true;
    };
  }, [receipts, chain, head, serverHead]);

  return { head, receipts, error, live, badge, openedUnsealed, reloadHead };
}
