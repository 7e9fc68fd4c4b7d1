import type { Receipt } from '../api/api-types.js';
import { formatDuration, summary } from '../runs/run-model.js';
import { Argv } from './ui.js';
import type { LiveStatus } from '../chain/use-live-chain.js';

/** Every receipt of a chain in order: seq, type, actor, time since the first, a summary; its fields on demand. */
export function ReceiptTimeline({ receipts }: { receipts: readonly Receipt[] }) {
  const firstTs = receipts[0]?.ts;
  return (
    <ol className="timeline" aria-label="Receipts">
      {receipts.map((receipt) => (
        <li key={receipt.seq} className={`timeline-item type-${receipt.type.replace(/\./g, '-')}`} data-seq={receipt.seq} data-type={receipt.type}>
          <div className="timeline-head">
            <span className="seq">#{receipt.seq}</span>
            <code className="type">{receipt.type}</code>
            <span className="muted small">{receipt.actor}</span>
            <span className="muted small timeline-time" title={receipt.ts}>
              {firstTs === undefined ? receipt.ts : `+${formatDuration(Date.parse(receipt.ts) - Date.parse(firstTs))}`}
            </span>
          </div>
          <div className="timeline-summary">
            {(receipt.type === 'step.started' || receipt.type === 'sandbox.exec.started') && Array.isArray(receipt.argv) ? <Argv argv={receipt.argv.map(String)} /> : summary(receipt)}
          </div>
          <details>
            <summary>Receipt</summary>
            <dl className="receipt-fields">
              {Object.entries(receipt).map(([name, value]) => (
                <div key={name}>
                  <dt>{name}</dt>
                  <dd>
                    <code>{typeof value === 'string' ? value : JSON.stringify(value)}</code>
                  </dd>
                </div>
              ))}
            </dl>
          </details>
        </li>
      ))}
    </ol>
  );
}

export function LiveIndicator({ status }: { status: LiveStatus }) {
  const text: Record<LiveStatus, string> = {
    loading: 'Loading…',
    live: 'Live',
    reconnecting: 'Reconnecting…',
    ended: 'Sealed — stream ended',
    idle: 'Sealed',
  };
  return (
    <span className={`live live-${status}`} data-live={status} role="status" aria-live="polite">
      {status === 'live' ? <span className="dot" aria-hidden="true" /> : null}
      {text[status]}
    </span>
  );
}
