import { chainBadgeView } from '../chain/badge-view.js';
import type { BadgeState } from '../chain/badge-view.js';

/**
 * The chain badge (`chainBadgeView` says what it shows): green only when this browser verified
 * the chain and it records no break of its own. `data-chain` carries the state for tests and
 * scripts, `data-break-seq` the seq of a recorded break.
 */
export function ChainBadge({ state }: { state: BadgeState }) {
  const view = chainBadgeView(state);
  return (
    <span className={`badge badge-${view.tone}`} data-chain={view.chain} data-break-seq={view.breakSeq} role={view.tone === 'bad' ? 'alert' : 'status'} title={view.title}>
      {view.mark === null ? null : (
        <>
          <span aria-hidden="true">{view.mark}</span>{' '}
        </>
      )}
      {view.text}
    </span>
  );
}
